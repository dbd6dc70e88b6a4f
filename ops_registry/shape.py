"""Joining, splitting and reshaping. Split, reshape and transpose alias their operand's memory
when they can (no kernel at all); split is one node with several outputs."""
from __future__ import annotations

import numpy as np

from .gradients import sum_to
from .kernels import broadcast_shared, infer_by_running, norm_axis, view_reshape
from .opdef import ARRAY, ARRAYS, ATTR, OpDef, ShapeError, declare


def _concatenate(xp, arrays, axis=0):
    return xp.concatenate(arrays, axis=axis)


def _concatenate_batched(xp, stacked, arrays, out=None, axis=0):
    ops = broadcast_shared(xp, stacked, arrays)
    if axis is None:                # numpy's rule: every array flattened first
        ops, axis = [o.reshape(o.shape[0], -1) for o in ops], 0
    return xp.concatenate(ops, axis=norm_axis(axis, ops[0].ndim - 1, "concatenate") + 1, out=out)


def _concatenate_gather(out, k, axis=0):
    if axis != 0 and axis != -(out.ndim - 1):
        return None
    return view_reshape(out, (out.shape[0], k, out.shape[1] // k) + out.shape[2:])


def _pieces(xp, stacked, needs, arrays, pieces):
    """Per item of a join, its gradient from ``pieces`` (each (B, *item shape)): shared items
    (a parameter joined to per-node values) are summed over the batch."""
    return ([None if not n else p if s else sum_to(xp, p, a.shape)
             for s, n, a, p in zip(stacked, needs, arrays, pieces)],)


def _concatenate_vjp(xp, stacked, needs, g, ans, arrays, axis=0):
    batch = g.shape[0]
    shapes = [a.shape[1:] if s else getattr(a, "shape", ()) for s, a in zip(stacked, arrays)]
    if axis is None:
        sizes, flat = [int(np.prod(s, dtype=np.int64)) for s in shapes], g
        ax = 1
    else:
        ax = norm_axis(axis, g.ndim - 1, "concatenate") + 1
        sizes, flat = [s[ax - 1] for s in shapes], g
    cuts = np.cumsum(sizes)[:-1].tolist()
    pieces = [p.reshape((batch,) + s) for p, s in zip(xp.split(flat, cuts, axis=ax), shapes)]
    return _pieces(xp, stacked, needs[0], arrays, pieces)


declare(OpDef(
    name="concatenate", doc="Join arrays along an existing axis (None: flattened first, as numpy).",
    operands=(("arrays", ARRAYS),), attrs=(("axis", 0),),
    eager=_concatenate, batched=_concatenate_batched, infer=infer_by_running(_concatenate),
    gather_view=_concatenate_gather, vjp=_concatenate_vjp,
))


def _stack(xp, arrays, axis=0):
    return xp.stack(arrays, axis=axis)


def _stack_batched(xp, stacked, arrays, out=None, axis=0):
    ops = broadcast_shared(xp, stacked, arrays)
    return xp.stack(ops, axis=norm_axis(axis, ops[0].ndim, "stack") + 1, out=out)


def _stack_vjp(xp, stacked, needs, g, ans, arrays, axis=0):
    ax = norm_axis(axis, g.ndim - 1, "stack") + 1
    return _pieces(xp, stacked, needs[0], arrays, [xp.take(g, i, axis=ax) for i in range(len(arrays))])


declare(OpDef(
    name="stack", doc="Join arrays along a new axis.",
    operands=(("arrays", ARRAYS),), attrs=(("axis", 0),),
    eager=_stack, batched=_stack_batched, infer=infer_by_running(_stack),
    gather_view=lambda out, k, axis=0: out if axis in (0, -out.ndim + 1) else None, vjp=_stack_vjp,
))


def _split_shape(shape, sections, axis):
    ax = norm_axis(axis, len(shape), "split")
    if not isinstance(sections, (int, np.integer)) or isinstance(sections, (bool, np.bool_)):
        raise ShapeError(f"split: sections must be a number of equal parts (an int), got {sections!r}; "
                         "split points are not supported (use slices)")
    sections = int(sections)
    if sections < 1 or shape[ax] % sections:
        raise ShapeError(f"split: axis {axis} of shape {shape} does not divide into {sections} equal parts")
    return ax, shape[:ax] + (sections, shape[ax] // sections) + shape[ax + 1:]


def _split(xp, x, sections, axis=0):
    _split_shape(x.shape, sections, axis)        # eager mode accepts what a scope records
    return tuple(xp.split(x, sections, axis=axis))


def _split_infer(x, sections, axis=0):
    ax, parted = _split_shape(np.shape(x), sections, axis)
    part = parted[:ax] + parted[ax + 1:]
    return [(part, np.result_type(x))] * parted[ax]


def _split_view(xp, base, sections, axis, reshape):
    """Batched ``base`` (N, *s) -> (N, sections, *part); part p is ``result[:, p]``."""
    ax, parted = _split_shape(base.shape[1:], sections, axis)
    grouped = reshape(base, (base.shape[0],) + parted)
    if grouped is None or ax == 0:
        return grouped
    return xp.moveaxis(grouped, ax + 1, 1)


def _split_batched(xp, stacked, x, out=None, sections=1, axis=0):
    return _split_view(xp, x, sections, axis, lambda a, s: a.reshape(s))


def _split_alias(xp, base, sections=1, axis=0):
    return _split_view(xp, base, sections, axis, view_reshape)


def _split_vjp(xp, stacked, needs, g, ans, x, sections=1, axis=0):
    """``g``: the gradient of the grouped result (B, sections, *part), its parts' gradients."""
    ax = _split_shape(x.shape[1:], sections, axis)[0]
    return ((g if ax == 0 else xp.moveaxis(g, 1, ax + 1)).reshape(x.shape),)


declare(OpDef(
    name="split", doc="Split into ``sections`` equal parts along ``axis`` (one node, several outputs).",
    operands=(("x", ARRAY), ("sections", ATTR)), attrs=(("axis", 0),),
    eager=_split, batched=_split_batched, infer=_split_infer,
    nout=lambda attrs: attrs["sections"], alias=_split_alias, vjp=_split_vjp,
))


def _reshape(xp, x, shape):
    return xp.reshape(x, shape)


def _shape(shape) -> tuple:
    """numpy's reshape takes one int for a 1-D shape."""
    return (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)


def _reshape_batched(xp, stacked, x, out=None, shape=()):
    return x.reshape((x.shape[0],) + _shape(shape))


def _reshape_alias(xp, base, shape=()):
    return view_reshape(base, (base.shape[0],) + _shape(shape))


declare(OpDef(
    name="reshape", doc="Give a new shape (one dimension may be -1) without changing the data.",
    operands=(("x", ARRAY), ("shape", ATTR)),
    eager=_reshape, batched=_reshape_batched, infer=infer_by_running(_reshape), alias=_reshape_alias,
    vjp=lambda xp, stacked, needs, g, ans, x, shape=(): (g.reshape(x.shape),),
))


def _transpose(xp, x, axes=None):
    return xp.transpose(x, axes)


def _batched_axes(ndim, axes):
    axes = tuple(reversed(range(ndim))) if axes is None else tuple(a % ndim for a in axes)
    return (0,) + tuple(a + 1 for a in axes)


def _transpose_batched(xp, stacked, x, out=None, axes=None):
    return xp.transpose(x, _batched_axes(x.ndim - 1, axes))


declare(OpDef(
    name="transpose", doc="Permute the axes (reverse them when ``axes`` is None).",
    operands=(("x", ARRAY),), attrs=(("axes", None),),
    eager=_transpose, batched=_transpose_batched, infer=infer_by_running(_transpose),
    alias=lambda xp, base, axes=None: _transpose_batched(xp, (True,), base, axes=axes),
    vjp=lambda xp, stacked, needs, g, ans, x, axes=None: (
        xp.transpose(g, np.argsort(_batched_axes(x.ndim - 1, axes)).tolist()),),
))
