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
    """``out[rows] += values`` where ``rows`` may repeat."""
    if xp.__name__ == "numpy":
        xp.add.at(out, rows, values)
    else:  # pragma: no cover - GPU machines only
        import cupyx
        cupyx.scatter_add(out, rows, values)


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
