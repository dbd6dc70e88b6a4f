"""Joining, splitting and reshaping. Split, reshape and transpose alias their operand's memory
when they can (no kernel at all); split is one node with several outputs."""
from __future__ import annotations

import numpy as np

from .gradients import sum_to, unbroadcast
from .kernels import broadcast_shared, dummy, infer_by_running, norm_axis, view_reshape
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
        if all(stacked):    # views of g's columns, sliced directly (xp.split costs ~10 us a call)
            pieces, lo, before = [], 0, (slice(None),) * ax
            for n, a in zip(sizes, needs[0]):
                pieces.append(g[before + (slice(lo, lo + n),)] if a else None)
                lo += n
            return (pieces,)
    cuts = np.cumsum(sizes)[:-1].tolist()
    pieces = [p.reshape((batch,) + s) for p, s in zip(xp.split(flat, cuts, axis=ax), shapes)]
    return _pieces(xp, stacked, needs[0], arrays, pieces)


declare(OpDef(
    name="concatenate", doc="Join arrays along an existing axis (None: flattened first, as numpy).",
    operands=(("arrays", ARRAYS),), attrs=(("axis", 0),),
    eager=_concatenate, batched=_concatenate_batched, infer=infer_by_running(_concatenate),
    gather_view=_concatenate_gather, vjp=_concatenate_vjp, numpy="concatenate",
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
    numpy="stack",
))


def _split_shape(shape, sections, axis):
    ax = norm_axis(axis, len(shape), "split")
    if not isinstance(sections, (int, np.integer)) or isinstance(sections, (bool, np.bool_)):
        raise ShapeError(f"split: sections must be a number of equal parts (an int), got {sections!r} "
                         "(la.split takes a list of split points too)")
    sections = int(sections)
    if sections < 1 or shape[ax] % sections:
        raise ShapeError(f"split: axis {axis} of shape {shape} does not divide into {sections} equal parts")
    return ax, shape[:ax] + (sections, shape[ax] // sections) + shape[ax + 1:]


def _split(xp, x, sections, axis=0):
    """Equal parts as views, sliced directly: ``xp.split`` (its general path, in Python) costs
    ~5 µs for four parts of a vector, these slices ~1."""
    ax, parted = _split_shape(x.shape, sections, axis)     # eager mode accepts what a scope records
    step, lead = parted[ax + 1], (slice(None),) * ax
    return tuple(x[lead + (slice(i, i + step),)] for i in range(0, x.shape[ax], step))


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


def _reshaped_vjp(xp, stacked, needs, g, ans, x, *_, **__):
    """Any op that only gives ``x`` another shape: the gradient is ``g`` in ``x``'s."""
    return (g.reshape(x.shape),)


declare(OpDef(
    name="reshape", doc="Give a new shape (one dimension may be -1) without changing the data.",
    operands=(("x", ARRAY), ("shape", ATTR)),
    eager=_reshape, batched=_reshape_batched, infer=infer_by_running(_reshape), alias=_reshape_alias,
    vjp=_reshaped_vjp,
))


def _reshaping(name, eager, doc, operands=(("x", ARRAY),), attrs=(), methods=()):
    """An op that is a reshape whose target shape follows from the instance's (expand_dims,
    squeeze, ravel): numpy's eager function on a zero-strided dummy gives it, once per batch."""
    def shape_of(x, attrs):
        return (x.shape[0],) + np.shape(eager(np, dummy(x.shape[1:], x.dtype), **attrs))

    declare(OpDef(
        name=name, doc=doc, operands=operands, attrs=attrs, methods=methods,
        eager=eager, infer=infer_by_running(eager), vjp=_reshaped_vjp,
        batched=lambda xp, stacked, x, out=None, **attrs: x.reshape(shape_of(x, attrs)),
        alias=lambda xp, base, **attrs: view_reshape(base, shape_of(base, attrs)),
    ))


_reshaping("expand_dims", lambda xp, x, axis: xp.expand_dims(x, axis),
           "Insert axes of length 1 at ``axis`` (an int or a tuple), positions in the result.",
           operands=(("x", ARRAY), ("axis", ATTR)))
_reshaping("squeeze", lambda xp, x, axis=None: xp.squeeze(x, axis),
           "Remove axes of length 1 (those of ``axis``, all when None; another length is an error).",
           attrs=(("axis", None),), methods=("squeeze",))
_reshaping("ravel", lambda xp, x: xp.ravel(x), "The entries as one axis, in C order (``x.flatten()`` too).",
           methods=("ravel", "flatten"))


def _broadcast_to(xp, x, shape):
    return xp.broadcast_to(x, shape)


def _broadcast_to_batched(xp, stacked, x, out=None, shape=()):
    """A copy, not numpy's read-only zero-strided view: the result is a value of its own."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    lifted = x.reshape((x.shape[0],) + (1,) * (len(shape) - x.ndim + 1) + x.shape[1:])
    view = xp.broadcast_to(lifted, (x.shape[0],) + shape)
    if out is None:
        return view.copy()
    out[...] = view
    return out


declare(OpDef(
    name="broadcast_to", doc="``x`` repeated to ``shape`` by numpy's broadcasting rules.",
    operands=(("x", ARRAY), ("shape", ATTR)),
    eager=_broadcast_to, batched=_broadcast_to_batched, infer=infer_by_running(_broadcast_to),
    vjp=lambda xp, stacked, needs, g, ans, x, shape=(): (unbroadcast(xp, g, x, stacked[0]),),
))


def _repeat(xp, x, repeats, axis=None):
    if not isinstance(repeats, (int, np.integer)) or isinstance(repeats, (bool, np.bool_)):
        raise ShapeError(f"repeat: repeats must be one int (the same count for every entry), got {repeats!r}")
    return xp.repeat(x, repeats, axis=axis)


def _repeat_axis(x, axis):
    """(x with the batch axis first and the repeated axis next to it or flattened, that axis):
    numpy reads a 0-d instance as one entry."""
    if axis is None or x.ndim == 1:
        return x.reshape(x.shape[0], -1), 1
    return x, norm_axis(axis, x.ndim - 1, "repeat") + 1


def _repeat_batched(xp, stacked, x, repeats, out=None, axis=None):
    flat, ax = _repeat_axis(x, axis)
    return xp.repeat(flat, repeats, axis=ax)


def _repeat_vjp(xp, stacked, needs, g, ans, x, repeats, axis=None):
    """Each entry's copies summed: the repeated axis split into (n, repeats), the copies' axis summed."""
    flat, ax = _repeat_axis(x, axis)
    return (g.reshape(flat.shape[:ax] + (flat.shape[ax], repeats) + flat.shape[ax + 1:]).sum(axis=ax + 1)
            .reshape(x.shape),)


declare(OpDef(
    name="repeat", doc="Each entry ``repeats`` times in a row along ``axis`` (of the flattened array when None).",
    operands=(("x", ARRAY), ("repeats", ATTR)), attrs=(("axis", None),), methods=("repeat",),
    eager=_repeat, batched=_repeat_batched, infer=infer_by_running(_repeat), vjp=_repeat_vjp,
))


def _tile_shapes(shape, reps):
    """numpy's rule: ``reps`` and the shape padded with leading 1s to one rank."""
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    rank = max(len(reps), len(shape))
    return (1,) * (rank - len(shape)) + tuple(shape), (1,) * (rank - len(reps)) + reps


def _tile(xp, x, reps):
    return xp.tile(x, reps)


def _tile_batched(xp, stacked, x, out=None, reps=()):
    shape, reps = _tile_shapes(x.shape[1:], reps)
    return xp.tile(x.reshape((x.shape[0],) + shape), (1,) + reps)


def _tile_vjp(xp, stacked, needs, g, ans, x, reps=()):
    """The copies summed: each axis of the result split into (reps, n), the reps axes summed."""
    shape, reps = _tile_shapes(x.shape[1:], reps)
    split = (g.shape[0],) + tuple(d for r, n in zip(reps, shape) for d in (r, n))
    return (g.reshape(split).sum(axis=tuple(range(1, len(split), 2))).reshape(x.shape),)


declare(OpDef(
    name="tile", doc="``x`` repeated ``reps`` times along each axis (numpy's rule for unequal ranks).",
    operands=(("x", ARRAY), ("reps", ATTR)),
    eager=_tile, batched=_tile_batched, infer=infer_by_running(_tile), vjp=_tile_vjp,
))


def _astype(xp, x, dtype):
    return xp.asarray(x).astype(dtype)


def _astype_vjp(xp, stacked, needs, g, ans, x, dtype=None):
    """``g`` in ``x``'s dtype (its real part for a real ``x``). Called for float results only:
    an integral result (float -> int) carries no gradient, as integral ops' results."""
    if g.dtype.kind == "c" and x.dtype.kind != "c":
        g = g.real
    return (g.astype(x.dtype),)


declare(OpDef(
    name="astype", doc="``x`` converted to ``dtype`` (numpy's unsafe casting: floats to ints truncate).",
    operands=(("x", ARRAY), ("dtype", ATTR)), methods=("astype",),
    eager=_astype, batched=lambda xp, stacked, x, out=None, dtype=None: x.astype(dtype),
    infer=infer_by_running(_astype), vjp=_astype_vjp,
))


def _copy(xp, x, out=None):
    if out is None:
        return xp.array(x, copy=True)
    out[...] = x
    return out


declare(OpDef(
    name="copy", doc="A copy of ``x`` (in a scope a value is never written to: the copy is for numpy's API).",
    operands=(("x", ARRAY),), methods=("copy",),
    eager=_copy, batched=lambda xp, stacked, x, out=None: _copy(xp, x, out), infer=infer_by_running(_copy),
    vjp=lambda xp, stacked, needs, g, ans, x: (g,),
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
