"""ED-Batch §5.3's sufficient-condition heuristic: batch the type whose ready nodes are the
largest share of its nodes that have no same-type ancestor left (Eq. 1's second term; at 1,
Lemma 1 says some shortest schedule starts with that type). No learning, but every step
updates that share for the types it changed, and the graphs G^a cost a search up front: the FSM
is its fast distiller."""
from __future__ import annotations

import numpy as np

from .frontier import Frontier, rollout
from .graph import GraphView


class SufficientScheduler:
    """Ties (e.g. several types at ratio 1) go to the agenda order (``Frontier.first``)."""

    name = "sufficient"

    def schedule(self, view: GraphView) -> list[np.ndarray]:
        if not len(view):
            return []
        return rollout(Frontier(view, typewise=True), Frontier.first)
