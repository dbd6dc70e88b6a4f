"""What the gradient rules (``OpDef.vjp``) share: broadcasting undone in one place (as
HIPS/autograd's ``unbroadcast``), sparse row gradients of shared tables, and the marker of ops
whose results carry no gradient.

A rule is ``vjp(xp, stacked, needs, g, ans, *operands, **attrs)``: the batched form, with the
operands and ``stacked`` flags the batched kernel got, ``g`` the gradient of the batched
result, ``ans`` the result. It returns one entry per positional operand: for a stacked operand
its gradient with the batch axis, for a shared one (a parameter) its gradient summed over the
batch (``dW = G.T @ X`` in one product), a ``Rows`` for a table read by rows, a list for a
sequence operand, None where ``needs`` says no gradient is wanted or none exists. Eager mode
runs the same rule on a batch of one, so the two cannot disagree.
"""
from __future__ import annotations


class Rows:
    """A sparse gradient of a shared table read along axis 0 (``E[w]``): ``values[i]`` adds to
    row ``indices[i]``. Kept sparse up to the optimizer, which updates only those rows."""

    __slots__ = ("indices", "values")

    def __init__(self, indices, values):
        self.indices, self.values = indices, values

    def dense(self, xp, shape, dtype):
        out = xp.zeros(shape, dtype)
        add_rows(xp, out, self.indices, self.values)
        return out


def add_rows(xp, out, rows, values):
    """``out[rows] += values`` where ``rows`` may repeat (``rows``: any index numpy takes)."""
    if xp.__name__ != "numpy":  # pragma: no cover - GPU machines only
        import cupyx
        cupyx.scatter_add(out, rows, values)
    elif type(rows) is xp.ndarray and rows.ndim == 1 and len(rows) > 1 and values.ndim > 1 \
            and values.shape[0] == len(rows) and -len(out) <= rows.min() and rows.max() < len(out):
        distinct, sums = sum_rows(xp, rows % len(out), values)     # whole rows: summed per row first
        out[distinct] += sums
    else:   # (and rows out of range: add.at raises numpy's IndexError)
        xp.add.at(out, rows, values)


def sum_rows(xp, rows, values):
    """(the distinct rows, ascending; ``values`` summed per row) for ``values[i]`` of row
    ``rows[i]``: one stable sort, then each row's first value plus the sum of its others, one
    ``add.reduceat`` over the rows of groups up to ``LONG_GROUP`` long (~5x faster than
    ``add.at`` on rows of 128 floats) and ``sum`` over each longer group. ``add.reduceat``
    costs ~0.4 µs a group and ~0.08 µs a row: it is given neither the rows seen once (most
    words of a minibatch) nor a frequent row's hundreds of values (the unknown word: half
    of SST's leaves), which ``sum`` adds ~5x faster. TreeLSTM, 64 trees: 0.56 -> 0.19 ms."""
    if xp.__name__ != "numpy":  # pragma: no cover - GPU machines only (no reduceat)
        distinct, where = xp.unique(rows, return_inverse=True)
        sums = xp.zeros((len(distinct),) + values.shape[1:], values.dtype)
        add_rows(xp, sums, where.reshape(-1), values)
        return distinct, sums
    if not len(rows):
        return rows, values[:0]
    order = xp.argsort(rows, kind="stable")
    ordered = rows[order]
    first = xp.concatenate(([True], ordered[1:] != ordered[:-1]))
    starts = xp.flatnonzero(first)
    values = values[order]
    sums = values[starts]
    counts = xp.diff(starts, append=len(rows))
    long = counts > LONG_GROUP
    for g in xp.flatnonzero(long).tolist():
        sums[g] += values[starts[g] + 1:starts[g] + counts[g]].sum(axis=0)
    short = (counts > 1) & ~long
    if short.any():
        others = counts[short] - 1
        sums[short] += xp.add.reduceat(values[~first & xp.repeat(~long, counts)], xp.cumsum(others) - others, axis=0)
    return ordered[starts], sums


#: values of one row past which ``sum_rows`` adds them by ``sum`` rather than ``add.reduceat``
LONG_GROUP = 64


def sum_to(xp, g, shape):
    """``g`` summed down to ``shape`` (numpy's broadcasting undone: leading axes, then axes
    where ``shape`` has 1)."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def unbroadcast(xp, g, operand, stacked):
    """The gradient of an elementwise op's operand from ``g`` (batched, (B, *result)): a stacked
    operand keeps its batch axis, a shared one is summed over it too. An operand of lower rank
    was aligned after the batch axis (``kernels.align``), so its axes are the trailing ones. A
    real operand of a complex result (``x * 1j``) gets the real part, as in HIPS/autograd."""
    shape = getattr(operand, "shape", ())
    if g.dtype.kind == "c" and getattr(operand, "dtype", g.dtype).kind != "c":
        g = g.real
    if not stacked:
        return sum_to(xp, g, shape)
    batch, inner = shape[0], shape[1:]
    lead = g.ndim - 1 - len(inner)
    if lead:
        g = g.sum(axis=tuple(range(1, 1 + lead)))
    axes = tuple(1 + i for i, n in enumerate(inner) if n == 1 and g.shape[1 + i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    if g.shape[0] != batch:         # a stacked operand of one row broadcast over the batch
        g = g.sum(axis=0, keepdims=True)
    return g


def no_gradient(*_, **__):
    """The rule of ops whose results are integers or bools (comparisons, bitwise ops): no
    gradient flows through them (the backward never asks: it starts only at float values)."""
    raise AssertionError("no gradient flows through an integral result")
