"""A schedule's contract, checked: for tests of every scheduler and for debugging new ones."""
from __future__ import annotations

import numpy as np

from .graph import GraphView


class InvalidSchedule(AssertionError):
    pass


def check_schedule(view: GraphView, batches) -> None:
    """Raise ``InvalidSchedule`` unless every node runs exactly once, every batch holds one
    type, and every node's inputs ran in an earlier batch."""
    n = len(view)
    step = np.full(n, -1)
    for i, batch in enumerate(batches):
        batch = np.asarray(batch)
        if batch.ndim == 1 and not len(batch):
            raise InvalidSchedule(f"batch {i} is empty")
        if batch.ndim != 1 or batch.dtype.kind not in "iu":
            raise InvalidSchedule(f"batch {i} is not a 1-d sequence of node ids (integers)")
        if batch.min() < 0 or batch.max() >= n:
            raise InvalidSchedule(f"batch {i} names a node outside 0..{n - 1}")
        if (step[batch] >= 0).any() or len(np.unique(batch)) != len(batch):
            raise InvalidSchedule(f"batch {i} repeats a node")
        types = view.types[batch]
        if (types != types[0]).any():
            raise InvalidSchedule(f"batch {i} mixes types {sorted(set(types.tolist()))}")
        step[batch] = i
    if (step < 0).any():
        raise InvalidSchedule(f"{int((step < 0).sum())} nodes never run")
    consumer = np.repeat(np.arange(n), np.diff(view.indptr))
    late = step[view.indices] >= step[consumer]
    if late.any():
        k = int(np.flatnonzero(late)[0])
        raise InvalidSchedule(f"node {consumer[k]} runs in batch {step[consumer[k]]} but its input "
                              f"{view.indices[k]} runs in batch {step[view.indices[k]]}")
