"""Indexing. Per-node integers (the word of ``E[w]``, the label of a loss) are data, batched into
one index array; static indices (slices, constant tuples) are attributes and alias memory."""
from __future__ import annotations

import numpy as np

from .gradients import Rows, add_rows, sum_to
from .kernels import infer_by_running, norm_axis, take_rows
from .opdef import ARRAY, ATTR, INDEX, Fusion, OpDef, ShapeError, declare
from .reduce import _log_softmax


def _flat(axis, ndim):
    """numpy's take reads a 0-d array as one element along axis 0 or -1: flattened."""
    if ndim == 0 and isinstance(axis, (int, np.integer)) and not isinstance(axis, bool) and axis in (0, -1):
        return None
    return axis


def _take(xp, a, indices, axis=None):
    axis = _flat(axis, np.ndim(a))
    if axis is None:                                    # numpy's default: the flattened array
        return take_rows(xp, a.reshape(-1), indices)
    if norm_axis(axis, np.ndim(a), "take") == 0:
        return take_rows(xp, a, indices)
    return xp.take(a, indices, axis=axis)


def _take_batched(xp, stacked, a, indices, out=None, axis=None):
    """``indices`` is (B, *ishape); the result is (B, *a_shape[:axis], *ishape, *a_shape[axis+1:])."""
    ishape = indices.shape[1:]
    axis = _flat(axis, a.ndim - stacked[0])
    if not stacked[0]:
        if axis is None:
            return take_rows(xp, a.reshape(-1), indices, out=out)
        ax = norm_axis(axis, a.ndim, "take")
        if ax == 0:
            return take_rows(xp, a, indices, out=out)
        return xp.moveaxis(xp.take(a, indices, axis=ax), ax, 0)
    if axis is None:
        a, axis = a.reshape(a.shape[0], -1), 0
    ax = norm_axis(axis, a.ndim - 1, "take") + 1
    rows = xp.arange(a.shape[0])
    if ishape:
        rows = rows.reshape((-1,) + (1,) * len(ishape))
    if ax == 1:     # (a loss's ``scores[label]``): numpy's moveaxis costs more than the pick itself
        return a[rows, indices]                         # (B, *ishape, *rest)
    picked = xp.moveaxis(a, ax, 1)[rows, indices]       # (B, *ishape, *rest)
    # bring the index axes back to where ``axis`` was
    k = len(ishape)
    order = [0] + list(range(1 + k, ax + k)) + list(range(1, 1 + k)) + list(range(ax + k, picked.ndim))
    return xp.transpose(picked, order)


def _take_bound(a, indices, axis=None):
    axis = _flat(axis, np.ndim(a))
    return np.size(a) if axis is None else np.shape(a)[norm_axis(axis, np.ndim(a), "take")]


def _take_vjp(xp, stacked, needs, g, ans, a, indices, axis=None):
    """A shared table read along axis 0 (``E[w]``) gets a sparse gradient (``Rows``); other
    reads scatter-add into a dense one (indices may repeat)."""
    if not needs[0]:
        return None, None
    ishape = indices.shape[1:]
    axis = _flat(axis, a.ndim - stacked[0])
    if not stacked[0]:
        if axis is None:
            out = xp.zeros(a.size, g.dtype)
            add_rows(xp, out, indices.reshape(-1), g.reshape(-1))
            return out.reshape(a.shape), None
        ax = norm_axis(axis, a.ndim, "take")
        if ax == 0:
            return Rows(indices.reshape(-1), g.reshape((-1,) + a.shape[1:])), None
        out = xp.zeros(a.shape, g.dtype)
        moved = xp.moveaxis(g, 0, ax)       # a.shape[:ax] + (B, *ishape) + a.shape[ax+1:]
        add_rows(xp, out, (slice(None),) * ax + (indices,), moved)
        return out, None
    flat_shape = a.shape
    if axis is None:
        a, axis = a.reshape(a.shape[0], -1), 0
    ax = norm_axis(axis, a.ndim - 1, "take") + 1
    k = len(ishape)
    if ax != 1:     # undo the forward's transpose of the index axes
        order = [0] + list(range(1 + k, ax + k)) + list(range(1, 1 + k)) + list(range(ax + k, g.ndim))
        g = xp.transpose(g, np.argsort(order).tolist())
    moved_shape = (a.shape[0], a.shape[ax]) + a.shape[1:ax] + a.shape[ax + 1:]
    out = xp.zeros(moved_shape, g.dtype)
    rows = xp.arange(a.shape[0]).reshape((-1,) + (1,) * k)
    add_rows(xp, out, (rows, indices), g)
    return xp.moveaxis(out, 1, ax).reshape(flat_shape), None


declare(OpDef(
    name="take", doc="Entries ``indices`` of ``a`` flattened, or along ``axis``, as ``numpy.take``; an "
                     "embedding lookup is ``E[w]`` or ``la.take(E, w, axis=0)``.",
    operands=(("a", ARRAY), ("indices", INDEX)), attrs=(("axis", None),),
    eager=_take, batched=_take_batched, infer=infer_by_running(_take), heavy=True, bound=_take_bound,
    vjp=_take_vjp,
))


def basic_index(index) -> tuple:
    """``index`` as a tuple of basic indices, or TypeError: only those make views (numpy turns
    lists, arrays and booleans into advanced indices, which copy)."""
    parts = index if isinstance(index, tuple) else (index,)
    for p in parts:
        c = p.__class__
        if c is slice or c is int or p is None:
            continue
        if not (p is Ellipsis or isinstance(p, (slice, int, np.integer))) or isinstance(p, (bool, np.bool_)):
            raise TypeError(f"LazyArray indices must be integers, slices, None or Ellipsis, got "
                            f"{type(p).__name__}; use la.take or la.pick for gathers")
    return parts


def _getitem(xp, x, index):
    return x[basic_index(index)]


def _getitem_batched(xp, stacked, x, out=None, index=()):
    return x[(slice(None),) + basic_index(index)]


def _getitem_vjp(xp, stacked, needs, g, ans, x, index=()):
    out = xp.zeros(x.shape, g.dtype)
    out[(slice(None),) + basic_index(index)] = g     # basic indices never repeat an element
    return (out,)


declare(OpDef(
    name="getitem", doc="Basic indexing with a static index (slices, constant integers, None, ...).",
    operands=(("x", ARRAY), ("index", ATTR)),
    eager=_getitem, batched=_getitem_batched, infer=infer_by_running(_getitem),
    alias=lambda xp, base, index=(): _getitem_batched(xp, (True,), base, index=index),
    vjp=_getitem_vjp,
))


def _pick(xp, x, index, axis=-1):
    ax = _pick_axis(x, index, axis)[1]              # eager mode accepts what a scope records
    idx = xp.expand_dims(xp.asarray(index), ax)
    return xp.squeeze(xp.take_along_axis(x, idx, axis=ax), axis=ax)


def _pick_batched(xp, stacked, x, index, out=None, axis=-1):
    if not stacked[0]:  # a shared x: the batch is the index's (``stacked`` names no INDEX operand)
        x = xp.broadcast_to(x, (len(index),) + x.shape)
    ax = norm_axis(axis, x.ndim - 1, "pick") + 1
    picked = xp.take_along_axis(x, xp.expand_dims(index, ax), axis=ax)
    return xp.squeeze(picked, axis=ax)


def _pick_axis(x, index, axis):
    """(result shape, normalised axis), or the error that recording would raise."""
    shape = np.shape(x)
    if not shape:
        raise ShapeError("pick: operand must have rank >= 1, got a scalar")
    ax = norm_axis(axis, len(shape), "pick")
    rest = shape[:ax] + shape[ax + 1:]
    if np.shape(index) != rest:
        raise ShapeError(f"pick: index shape {np.shape(index)} must be {rest} for x of shape {shape}, axis {axis}")
    return rest, ax


def _pick_infer(x, index, axis=-1):
    return _pick_axis(x, index, axis)[0], np.result_type(x)


def _pick_vjp(xp, stacked, needs, g, ans, x, index, axis=-1):
    if not needs[0]:
        return None, None
    shape = x.shape if stacked[0] else (len(index),) + x.shape
    ax = norm_axis(axis, len(shape) - 1, "pick") + 1
    out = xp.zeros(shape, g.dtype)
    xp.put_along_axis(out, xp.expand_dims(index, ax), xp.expand_dims(g, ax), axis=ax)
    return (out if stacked[0] else sum_to(xp, out, x.shape)), None


declare(OpDef(
    name="pick", doc="One entry along ``axis`` per position (``-log_softmax(z)[label]``-style losses).",
    operands=(("x", ARRAY), ("index", INDEX)), attrs=(("axis", -1),),
    eager=_pick, batched=_pick_batched, infer=_pick_infer,
    bound=lambda x, index, axis=-1: np.shape(x)[norm_axis(axis, np.ndim(x), "pick")], vjp=_pick_vjp,
))


def _pick_log_softmax(xp, x, index, axis=-1):
    return _pick(xp, _log_softmax(xp, x, axis), index, axis)


#: Rows of a classifier's logits are reduced in blocks of about this many elements (1 MiB of
#: float32) on the CPU: whole-batch temporaries of a big vocabulary (LSTM-NMT: 1,500 x 10,900,
#: 65 MB each) are fresh mappings that fault on every page, and do not stay in cache.
BLOCK = 1 << 18
#: At most this many classes, numpy reduces a block's columns instead of its rows (see ``_narrow``).
NARROW = 64


def _wide(xp, block, index, scratch):
    """Along the rows, in ``scratch``: for many classes a row's own loop is the fast one."""
    shifted = scratch[:len(block)]
    xp.subtract(block, block.max(axis=1, keepdims=True), out=shifted)
    mine = shifted[xp.arange(len(block)), index]
    mine -= xp.log(xp.exp(shifted, out=shifted).sum(axis=1))
    return mine


def _narrow(xp, block, index, scratch):
    """numpy reduces each row with a loop of its own, ~30 ns a row: for a few classes (a
    sentiment or tag classifier) that is most of the time, so a transposed copy of the block
    (always a copy: it is overwritten) is reduced across its n-long rows instead, 2-5x faster
    for up to 64 classes."""
    cols = block.T.copy()
    top = cols.max(axis=0)
    mine = cols[index, xp.arange(len(block))] - top
    cols -= top
    mine -= xp.log(xp.exp(cols, out=cols).sum(axis=0))
    return mine


def _pick_log_softmax_batched(xp, stacked, x, index, out=None, axis=-1):
    """log_softmax(x)[index] without writing log_softmax(x): the picked entry minus logsumexp."""
    if not stacked[0]:  # a shared x: the batch is the index's (``stacked`` names no INDEX operand)
        x = xp.broadcast_to(x, (len(index),) + x.shape)
    ax = norm_axis(axis, x.ndim - 1, "pick_log_softmax") + 1
    if x.dtype.kind not in "fc":  # integers and bools: eager's own arithmetic (x - max in x's type, then
        picked = xp.take_along_axis(_log_softmax(xp, x, ax), xp.expand_dims(index, ax), axis=ax)
        return xp.squeeze(picked, axis=ax)      # exp to a float), not the in-place float kernels below
    if x.ndim == 2:  # one row per node (a classifier's loss): plain fancy indexing is cheapest
        n, width = x.shape
        rows = max(1, BLOCK // max(width, 1)) if xp is np else n
        if xp is np and width <= NARROW:
            reduce, scratch = _narrow, None
        else:
            reduce, scratch = _wide, xp.empty((min(rows, n), width), dtype=x.dtype)
        if rows >= n:
            return reduce(xp, x, index, scratch)
        picked = xp.empty(n, dtype=x.dtype)
        for lo in range(0, n, rows):
            picked[lo:lo + rows] = reduce(xp, x[lo:lo + rows], index[lo:lo + rows], scratch)
        return picked
    shifted = x - x.max(axis=ax, keepdims=True)
    picked = xp.take_along_axis(shifted, xp.expand_dims(index, ax), axis=ax)
    picked -= xp.log(xp.sum(xp.exp(shifted), axis=ax, keepdims=True))
    return xp.squeeze(picked, axis=ax)


def _pick_log_softmax_infer(x, index, axis=-1):
    """pick's shape, log_softmax's dtype: integers give floats (float16 for int8, as numpy's exp)."""
    shape = _pick_axis(x, index, axis)[0]
    with np.errstate(all="ignore"):
        dtype = _log_softmax(np, np.zeros((1,), np.result_type(x)), -1).dtype
    return shape, dtype


def _same_axis(producer, consumer, ndim):
    axis = consumer["axis"]
    if ndim and norm_axis(producer["axis"], ndim, "log_softmax") == norm_axis(axis, ndim, "pick"):
        return {"axis": axis}
    return None


def _pick_log_softmax_vjp(xp, stacked, needs, g, ans, x, index, axis=-1):
    """d/dx of log_softmax(x)[i] is onehot(i) - softmax(x), times g."""
    if not needs[0]:
        return None, None
    xb = x if stacked[0] else xp.broadcast_to(x, (len(index),) + x.shape)
    ax = norm_axis(axis, xb.ndim - 1, "pick_log_softmax") + 1
    if xb.ndim == 2 and xb.dtype.kind == "f":
        out = _rows_vjp(xp, g, xb, index)
        return (out if stacked[0] else sum_to(xp, out, x.shape)), None
    e = xp.exp(xb - xb.max(axis=ax, keepdims=True))
    e /= e.sum(axis=ax, keepdims=True)
    ge = xp.expand_dims(g, ax)
    out = e * -ge
    at = xp.expand_dims(index, ax)
    xp.put_along_axis(out, at, xp.take_along_axis(out, at, axis=ax) + ge, axis=ax)
    return (out if stacked[0] else sum_to(xp, out, x.shape)), None


def _rows_vjp(xp, g, x, index):
    """The rule for one row per node (a classifier's loss) in one array, written in place:
    reduced across the transpose of a narrow block, as the forward (``_narrow``), and indexed
    plainly (``put_along_axis`` costs ~20 us a call)."""
    rows = xp.arange(len(x))
    if xp is np and x.shape[1] <= NARROW:
        e = x.T.copy()
        e -= e.max(axis=0)
        xp.exp(e, out=e)
        e *= -g / e.sum(axis=0)
        e[index, rows] += g
        return e.T
    e = x - x.max(axis=1, keepdims=True)
    xp.exp(e, out=e)
    e *= (-g / e.sum(axis=1))[:, None]
    e[rows, index] += g
    return e


declare(OpDef(
    name="pick_log_softmax",
    doc="``la.pick(la.log_softmax(x, axis), index, axis)`` in one node (a classifier's loss; DyNet's "
        "pickneglogsoftmax without the minus). ``log_softmax(z)[label]`` and ``pick(log_softmax(z), "
        "label)`` record this op when the log_softmax is used only there.",
    operands=(("x", ARRAY), ("index", INDEX)), attrs=(("axis", -1),),
    eager=_pick_log_softmax, batched=_pick_log_softmax_batched, infer=_pick_log_softmax_infer,
    bound=lambda x, index, axis=-1: np.shape(x)[norm_axis(axis, np.ndim(x), "pick_log_softmax")],
    fuses=(Fusion("log_softmax", "pick", _same_axis),
           Fusion("log_softmax", "take", lambda p, c, ndim: _same_axis(p, {"axis": c["axis"] or 0}, ndim)
                  if ndim == 1 else None)),
    vjp=_pick_log_softmax_vjp,
))


def _segment_ids(values, segment_ids, num_segments):
    """The ids as an int array, or the error a scope raises when it records the call."""
    if num_segments is None or isinstance(num_segments, (bool, np.bool_)) \
            or not isinstance(num_segments, (int, np.integer)) or num_segments < 0:
        raise ShapeError(f"segment_sum: num_segments must be a non-negative int, got {num_segments!r}")
    ids = np.asarray(segment_ids)
    if ids.ndim != 1 or not np.shape(values) or ids.shape[0] != np.shape(values)[0]:
        raise ShapeError(f"segment_sum: segment_ids of shape {ids.shape} must give one id per row of values "
                         f"of shape {np.shape(values)}")
    return ids


def _segment_sum(xp, values, segment_ids, num_segments=None):
    _segment_ids(values, segment_ids, num_segments)
    out = xp.zeros((num_segments,) + values.shape[1:], values.dtype)
    add_rows(xp, out, xp.asarray(segment_ids), values)
    return out


def _segment_sum_infer(values, segment_ids, num_segments=None):
    _segment_ids(values, segment_ids, num_segments)
    return (num_segments,) + np.shape(values)[1:], np.result_type(values)


def _segment_sum_batched(xp, stacked, values, segment_ids, out=None, num_segments=None):
    """Every call's rows added into its own segments: one scatter-add for the batch."""
    if not stacked[0]:  # shared values: the batch is the ids' (``stacked`` names no INDEX operand)
        values = xp.broadcast_to(values, (len(segment_ids),) + values.shape)
    out = xp.zeros((values.shape[0], num_segments) + values.shape[2:], values.dtype)
    add_rows(xp, out, (xp.arange(values.shape[0])[:, None], segment_ids), values)
    return out


def _segment_sum_vjp(xp, stacked, needs, g, ans, values, segment_ids, num_segments=None):
    """Each row gets its segment's gradient."""
    if not needs[0]:
        return None, None
    rows = g[xp.arange(g.shape[0])[:, None], segment_ids]
    return (rows if stacked[0] else sum_to(xp, rows, values.shape)), None


declare(OpDef(
    name="segment_sum",
    doc="Row i of ``values`` added into row ``segment_ids[i]`` of a (num_segments, ...) result (TensorFlow's "
        "unsorted_segment_sum). Calls batch when they have the same number of rows and of segments (the "
        "signature holds the values' class, the ids' shape and num_segments; the ids are data); to sum a "
        "varying number of values under one signature use ``la.child_sum``.",
    operands=(("values", ARRAY), ("segment_ids", INDEX)), attrs=(("num_segments", None),),
    eager=_segment_sum, batched=_segment_sum_batched, infer=_segment_sum_infer,
    bound=lambda values, segment_ids, num_segments=None: num_segments, vjp=_segment_sum_vjp,
))
