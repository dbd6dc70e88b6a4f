"""Schedulers turn a graph segment into batches: arrays of local node ids of one type whose
inputs are all produced by earlier batches.

A scheduler is any object with ``schedule(view) -> list[numpy.ndarray]``; ``resolve`` turns the
names users pass to ``la.batching(scheduler=...)`` into one.
"""
from __future__ import annotations

import numpy as np

from .bytype import by_type
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
        """Types, most urgent first (``agenda_order``)."""
        return np.array(agenda_order(view), dtype=np.int64)

    def schedule(self, view: GraphView) -> list[np.ndarray]:
        if not len(view):
            return []
        rank = agenda_rank(view)    # once: the frontier, where ``by_type`` gives up, takes it too
        batches = by_type(view, rank)
        return _rollout(view, rank) if batches is None else batches


def agenda_order(view: GraphView) -> list[int]:
    """The agenda's types, most urgent first: lowest average depth, then cheap before heavy,
    then by type label (then local id), not by local id alone: those ids follow the order in
    which the process first met each signature, and a schedule (and what a learned policy does)
    must not depend on what the process recorded before. Sorted in Python: two bincounts and a
    sort of a few tuples cost less than numpy's lexsort and its arrays for the handful of types
    a flush has (and as much for thousands)."""
    ntypes, counts = view.ntypes, view.type_counts
    sums = np.bincount(view.types, weights=view.depth, minlength=ntypes).tolist()
    heavy, labels = view.heavy.tolist(), view.type_labels
    return sorted(range(ntypes), key=lambda t: (sums[t] / counts[t], heavy[t], labels[t]))


def agenda_rank(view: GraphView) -> list[int]:
    """Per local type, its place in ``agenda_order``: the tie-break and the fallback of the
    learned schedulers."""
    rank = [0] * view.ntypes
    for r, t in enumerate(agenda_order(view)):
        rank[t] = r
    return rank


def run_agenda(view: GraphView, rank_order: np.ndarray) -> list[np.ndarray]:
    """The agenda loop for a fixed type priority (``rank_order``: types, most urgent first): the
    learned schedulers' frontier, always taking the most urgent ready type."""
    if not len(view):
        return []
    rank = np.empty(view.ntypes, dtype=np.int64)
    rank[rank_order] = np.arange(view.ntypes)
    return _rollout(view, rank.tolist())


def _rollout(view: GraphView, rank: list[int]) -> list[np.ndarray]:
    """The agenda loop for ``rank`` (per local type, its place, most urgent first)."""
    from .frontier import Frontier, rollout  # frontier imports this module
    return rollout(Frontier(view, rank=rank), Frontier.first)


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
