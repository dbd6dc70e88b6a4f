"""Schedulers turn a graph segment into batches: arrays of local node ids of one type whose
inputs are all produced by earlier batches.

A scheduler is any object with ``schedule(view) -> list[numpy.ndarray]``; ``resolve`` turns the
names users pass to ``la.batching(scheduler=...)`` into one.
"""
from __future__ import annotations

import numpy as np

from .graph import GraphView


class DepthScheduler:
    """TensorFlow Fold: nodes of equal depth and type form a batch (one argsort)."""

    name = "depth"

    def schedule(self, view: GraphView) -> list[np.ndarray]:
        if not len(view):
            return []
        key = view.depth * view.ntypes + view.types
        order = np.argsort(key, kind="stable")
        cuts = np.flatnonzero(np.diff(key[order])) + 1
        return np.split(order, cuts)


class AgendaScheduler:
    """DyNet §3.2: repeatedly batch every ready node of the ready type whose nodes have the
    lowest average depth; ties go to cheap (elementwise) types before heavy ones."""

    name = "agenda"

    def priorities(self, view: GraphView) -> np.ndarray:
        """Types, most urgent first. Remaining ties go by type label (then local id), not by
        local id alone: those ids follow the order in which the process first met each
        signature, and a schedule (and what a learned policy does) must not depend on what the
        process recorded before."""
        counts = np.bincount(view.types, minlength=view.ntypes)
        avg = np.bincount(view.types, weights=view.depth, minlength=view.ntypes) / np.maximum(counts, 1)
        labels = view.type_labels
        by_label = np.empty(view.ntypes, dtype=np.int64)
        by_label[sorted(range(view.ntypes), key=labels.__getitem__)] = np.arange(view.ntypes)
        return np.lexsort((by_label, view.heavy, avg))

    def schedule(self, view: GraphView) -> list[np.ndarray]:
        return run_agenda(view, self.priorities(view))


def run_agenda(view: GraphView, rank_order: np.ndarray) -> list[np.ndarray]:
    """The agenda loop for a fixed type priority (``rank_order``: types, most urgent first): the
    learned schedulers' frontier, always taking the most urgent ready type."""
    from .frontier import Frontier, rollout  # frontier imports this module
    if not len(view):
        return []
    rank = np.empty(view.ntypes, dtype=np.int64)
    rank[rank_order] = np.arange(view.ntypes)
    return rollout(Frontier(view, rank=rank.tolist()), Frontier.first)


SCHEDULERS = {"depth": DepthScheduler, "agenda": AgendaScheduler}


def resolve(scheduler):
    """A scheduler name or object -> a scheduler object."""
    if isinstance(scheduler, str):
        try:
            return SCHEDULERS[scheduler]()
        except KeyError:
            raise ValueError(f"unknown scheduler {scheduler!r}; choose from {sorted(SCHEDULERS)} "
                             "or pass a scheduler object (e.g. a learned policy)") from None
    if not callable(getattr(scheduler, "schedule", None)):
        raise TypeError(f"scheduler must be a name or have a schedule(view) method, got {scheduler!r}")
    return scheduler
