"""ED-Batch's lower bound (Appendix A.3): a batch holds one type and no two nodes of which one
depends on the other, so type t needs at least as many batches as the most t-nodes on any path,
and no schedule can use fewer batches than the sum of those over types."""
from __future__ import annotations

import numpy as np

from .graph import GraphView, gather_ranges

_CELLS = 1 << 24  # nodes x types counted at once: bounds the memory of the count matrix


def lower_bound(view: GraphView) -> int:
    n, ntypes = len(view), view.ntypes
    step = max(1, _CELLS // max(n, 1))
    return sum(_longest_chains(view, np.arange(lo, min(lo + step, ntypes))) for lo in range(0, ntypes, step))


def _longest_chains(view: GraphView, types: np.ndarray) -> int:
    """Sum over ``types`` of the most nodes of that type on one path, one depth level at a time."""
    column = np.full(view.ntypes, -1)
    column[types] = np.arange(len(types))
    mine = column[view.types]
    count = np.zeros((len(view), len(types)), dtype=np.int64)
    ndeps = np.diff(view.indptr)
    order = np.argsort(view.depth, kind="stable")
    for level in np.split(order, np.flatnonzero(np.diff(view.depth[order])) + 1):
        inner = level[ndeps[level] > 0]
        if len(inner):
            rows = count[gather_ranges(view.indptr, view.indices, inner)]
            starts = np.cumsum(ndeps[inner]) - ndeps[inner]
            count[inner] = np.maximum.reduceat(rows, starts, axis=0)
        own = level[mine[level] >= 0]
        count[own, mine[own]] += 1
    return int(count.max(axis=0, initial=0).sum())
