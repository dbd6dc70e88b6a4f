"""Batch-aware placement of a flush's values (ED-Batch §3) through ``memplan``.

The executor keeps each result class in one arena. Without a plan, a batch's results take the
next rows in schedule order, so an operand is a view only when its producers happened to run in
one batch, in order. With a plan, ``memplan.layout`` chooses the rows of every value and the order
in which each batch runs its nodes so that as many operands as possible are contiguous and
aligned, weighted by bytes: those become views instead of gathers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import batching
import memplan

from .array import CLASSES

PART_BITS, PART_MASK = batching.PART_BITS, batching.PART_MASK


@dataclass(frozen=True)
class MemoryPlan:
    batches: list          # the schedule's batches, each in the order the plan runs its nodes
    rows: np.ndarray       # per local node: its row in the arena of its class
    aligned: int           # operands the plan made contiguous and aligned
    operands: int          # operands it was asked about


def _class_bytes(cls) -> int:
    if isinstance(cls, tuple):
        return sum(_class_bytes(c) for c in cls)
    shape, dtype = CLASSES[cls]
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def plan(view, batches, payloads) -> MemoryPlan:
    """Rows for every value of the flush and a run order for every batch.

    A value is named by the node whose rows hold it: a cell's outputs share the rows of the
    cell's node (one arena per output), and a split/reshape/slice that aliases its operand
    shares the operand's rows, so those batches add no constraint of their own."""
    n = len(view)
    node_cls = [None] * n
    root = np.arange(n)
    problems, weights, planned = [], [], []
    for b, batch in enumerate(batches):
        payload = payloads[int(view.sig[batch[0]])]
        for v in batch.tolist():
            node_cls[v] = payload.out_cls
        sources = []
        for slot in _stacked_slots(payload.layout):
            producers = (view.ins[view.offsets[batch] + slot] >> PART_BITS) - view.start
            if (producers >= 0).all():  # earlier flushes already have their rows
                sources.append(root[producers])
        if payload.kind == "op" and payload.op.alias is not None and len(sources) == 1:
            root[batch] = sources[0]
            continue
        problems.append(tuple([batch.tolist()] + [s.tolist() for s in sources]))
        weights.append(_class_bytes(payload.out_cls))
        planned.append(b)
    result = memplan.layout(n, problems, weights)
    perm = [np.arange(len(batch)) for batch in batches]
    for b, p in zip(planned, result.perm):
        perm[b] = np.asarray(p, dtype=np.int64)
    rows = np.zeros(n, dtype=np.int64)
    seen: dict = {}
    for v in result.order:
        cls = node_cls[v]
        rows[v] = seen.get(cls, 0)
        seen[cls] = rows[v] + 1
    ordered = [batch[p] for batch, p in zip(batches, perm)]
    aligned = sum(sum(flags[1:]) for flags in result.aligned)
    asked = sum(len(flags) - 1 for flags in result.aligned)
    return MemoryPlan(ordered, rows, aligned, asked)


def _stacked_slots(layout):
    for spec in layout:
        if spec[0] == "stacked":
            yield spec[1]
        elif spec[0] == "list":
            yield from (s[1] for s in spec[1] if s[0] == "stacked")
