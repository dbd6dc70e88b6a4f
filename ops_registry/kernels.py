"""Helpers shared by the declarations: inference by running the eager kernel on dummies, the
elementwise batching rule, axis shifting, and copy-free reshapes."""
from __future__ import annotations

import numpy as np

from .opdef import ShapeError


def dummy(shape, dtype):
    """A zero-strided stand-in: numpy's own rules infer shapes and dtypes without real data."""
    return np.broadcast_to(np.zeros((), dtype), shape)


def infer_by_running(eager):
    """Default ``infer``: numpy itself decides shapes, dtypes and errors, once per signature."""

    def infer(*operands, **attrs):
        with np.errstate(all="ignore"):
            out = eager(np, *operands, **attrs)
        if isinstance(out, tuple):
            return [(o.shape, o.dtype) for o in out]
        return np.shape(out), np.result_type(out)

    return infer


def per_instance_rank(stacked, operands):
    """Rank of one instance's broadcast result (scalars are rank 0; ``.ndim`` is read directly,
    ``np.ndim`` costs a Python wrapper call per operand per batch)."""
    return max(getattr(a, "ndim", 0) - s for s, a in zip(stacked, operands))


def align(stacked, operands, rank):
    """Put singleton axes after the batch axis of stacked operands of lower rank, so numpy's
    right-aligned broadcasting gives, per instance, the eager result."""
    out = []
    for s, a in zip(stacked, operands):
        if s and a.ndim - 1 < rank:
            a = a.reshape((a.shape[0],) + (1,) * (rank - a.ndim + 1) + a.shape[1:])
        out.append(a)
    return out


def elementwise(fn):
    """Derive the batched kernel of an elementwise op from its eager ``fn(xp, *ops, out=None)``."""

    def batched(xp, stacked, *operands, out=None):
        return fn(xp, *align(stacked, operands, per_instance_rank(stacked, operands)), out=out)

    return batched


def take_rows(xp, a, rows, out=None):
    """``a[rows]`` along axis 0 (into ``out`` if given): ``take`` where ``a`` is C-contiguous, the
    cheapest gather; fancy indexing otherwise, because ``take`` first copies a non-contiguous
    source whole (~1 ms for a part of a 7 MB split result, to gather 30 of its rows). Into
    ``out``, numpy's ``take`` checks bounds through a temporary copy (2.5-3x slower), so it
    wraps instead: rows given with ``out`` were checked when they were recorded."""
    if a.flags.c_contiguous:
        if out is not None and xp is np:
            return a.take(rows, axis=0, out=out, mode="wrap")
        return a.take(rows, axis=0, out=out)
    if out is None:
        return a[rows]
    out[...] = a[rows]
    return out


def norm_axis(axis, ndim, op):
    if not -ndim <= axis < max(ndim, 1):
        raise ShapeError(f"{op}: axis {axis} is out of bounds for an operand of rank {ndim}")
    return axis % ndim if ndim else 0


def shift_axes(axis, ndim):
    """Per-instance reduction axes -> batched axes (the batch axis is 0). A 0-d instance has
    none to reduce (numpy takes axis 0 or -1 of it to mean the value itself)."""
    if axis is None or ndim == 0:
        return tuple(range(1, ndim + 1))   # () for a 0-d instance
    if isinstance(axis, tuple):
        return tuple(a % ndim + 1 for a in axis)
    return axis % ndim + 1


def view_reshape(a, shape):
    """``a.reshape(shape)`` if that is a view, else None: an alias must never copy."""
    try:
        return a.reshape(shape, copy=False)
    except (ValueError, TypeError):
        return None


def broadcast_shared(xp, stacked, operands):
    """Give shared operands the batch axis (a zero-stride view) for ops that need equal ranks."""
    batch = next(a.shape[0] for s, a in zip(stacked, operands) if s)
    return [a if s else xp.broadcast_to(a, (batch,) + a.shape) for s, a in zip(stacked, operands)]

