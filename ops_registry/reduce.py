"""Reductions and normalisations over an axis; the batch axis is never reduced."""
from __future__ import annotations

import numpy as np

from .gradients import no_gradient
from .kernels import infer_by_running, shift_axes
from .opdef import ARRAY, OpDef, declare


def _kept(xp, x, axis, keepdims, *values):
    """The batched reduction axes of ``axis`` (sorted, a tuple) and ``values`` (the result and
    its gradient) with those axes back as singletons, so they broadcast against ``x``."""
    axes = shift_axes(axis, x.ndim - 1)
    axes = tuple(sorted(axes)) if isinstance(axes, tuple) else (axes,)
    if keepdims:
        return axes, list(values)
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))     # (expand_dims: ~4 µs more)
    return axes, [v.reshape(kept) for v in values]


def _reduction_vjp(name):
    """g spread back over the reduced axes: as it is (sum), divided by their size (mean), onto
    the extrema, shared evenly between ties (max, min)."""
    def vjp(xp, stacked, needs, g, ans, x, axis=None, keepdims=False):
        if name == "sum":
            return (xp.broadcast_to(_kept(xp, x, axis, keepdims, g)[1][0], x.shape),)
        if name == "mean":
            axes, (g,) = _kept(xp, x, axis, keepdims, g)
            return (xp.broadcast_to(g / max(1, int(np.prod([x.shape[a] for a in axes]))), x.shape),)
        axes, (g, ans) = _kept(xp, x, axis, keepdims, g, ans)
        hit = (x == ans).astype(g.dtype)
        return (hit * (g / hit.sum(axis=axes, keepdims=True)),)
    return vjp


def _reduction(name, doc, vjp=None):
    def eager(xp, x, axis=None, keepdims=False):
        return getattr(xp, name)(x, axis=axis, keepdims=keepdims)

    def batched(xp, stacked, x, out=None, axis=None, keepdims=False):
        axes = shift_axes(axis, x.ndim - 1)
        if name == "mean" and x.dtype == np.float16:
            # numpy's mean of float16 sums in float32 and rounds once, at the end; given ``out``
            # it rounds the float32 sum into float16 first (inf past 65504, before dividing)
            return xp.mean(x, axis=axes, keepdims=keepdims)
        return getattr(xp, name)(x, axis=axes, keepdims=keepdims, out=out)

    declare(OpDef(
        name=name, doc=doc, operands=(("x", ARRAY),), attrs=(("axis", None), ("keepdims", False)),
        eager=eager, batched=batched, infer=infer_by_running(eager), methods=(name,),
        vjp=vjp or _reduction_vjp(name),
    ))


_reduction("sum", "Sum over ``axis`` (all axes when None).")
_reduction("mean", "Mean over ``axis`` (all axes when None).")
_reduction("max", "Maximum over ``axis`` (all axes when None).")
_reduction("min", "Minimum over ``axis`` (all axes when None).")
_reduction("any", "Whether any entry over ``axis`` is nonzero (bool; all axes when None).", no_gradient)
_reduction("all", "Whether every entry over ``axis`` is nonzero (bool; all axes when None).", no_gradient)


def _arg_extremum(name, doc):
    """argmax / argmin: an integer position, so no gradient. numpy reads a 0-d operand as one
    element (axis None, 0 or -1 give 0), as does the flattened batched form."""
    def eager(xp, x, axis=None, keepdims=False):
        return getattr(xp, name)(x, axis=axis, keepdims=keepdims)

    def batched(xp, stacked, x, out=None, axis=None, keepdims=False):
        rank = x.ndim - 1
        if axis is None or rank == 0:
            flat = getattr(xp, name)(x.reshape(x.shape[0], -1), axis=1)
            return flat.reshape((x.shape[0],) + (1,) * rank) if keepdims else flat
        return getattr(xp, name)(x, axis=shift_axes(axis, rank), keepdims=keepdims)

    declare(OpDef(
        name=name, doc=doc, operands=(("x", ARRAY),), attrs=(("axis", None), ("keepdims", False)),
        eager=eager, batched=batched, infer=infer_by_running(eager), methods=(name,), vjp=no_gradient,
    ))


_arg_extremum("argmax", "Index of the maximum along ``axis`` (of the flattened array when None; first on ties).")
_arg_extremum("argmin", "Index of the minimum along ``axis`` (of the flattened array when None; first on ties).")


def _logsumexp(xp, x, axis=None, keepdims=False):
    """log(sum(exp(x))) shifted by the maximum; where that is not finite (all -inf, or an inf)
    the shift is 0, as scipy's, so the result is -inf or inf instead of nan."""
    top = xp.max(x, axis=axis, keepdims=True)
    top = xp.where(xp.isfinite(top), top, 0)
    out = xp.log(xp.sum(xp.exp(x - top), axis=axis, keepdims=True)) + top
    return out if keepdims else xp.squeeze(out, axis=axis)


def _logsumexp_vjp(xp, stacked, needs, g, ans, x, axis=None, keepdims=False):
    """d/dx logsumexp(x) = softmax(x) over the reduced axes."""
    _, (g, ans) = _kept(xp, x, axis, keepdims, g, ans)
    return (g * xp.exp(x - ans),)


declare(OpDef(
    name="logsumexp", doc="log(sum(exp(x))) over ``axis`` (all axes when None), computed stably (scipy's logsumexp).",
    operands=(("x", ARRAY),), attrs=(("axis", None), ("keepdims", False)),
    eager=_logsumexp, infer=infer_by_running(_logsumexp), vjp=_logsumexp_vjp,
    batched=lambda xp, stacked, x, out=None, axis=None, keepdims=False: _logsumexp(
        xp, x, shift_axes(axis, x.ndim - 1), keepdims),
))


def _log_softmax(xp, x, axis):     # array methods: numpy's functions cost ~1 µs more per call
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


def _softmax(xp, x, axis):
    e = xp.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _normalisation(name, fn, grad, doc):
    def eager(xp, x, axis=-1):
        return fn(xp, x, axis)

    def batched(xp, stacked, x, out=None, axis=-1):
        return fn(xp, x, shift_axes(axis, x.ndim - 1))

    def vjp(xp, stacked, needs, g, ans, x, axis=-1):
        return (grad(xp, g, ans, shift_axes(axis, x.ndim - 1)),)

    declare(OpDef(
        name=name, doc=doc, operands=(("x", ARRAY),), attrs=(("axis", -1),),
        eager=eager, batched=batched, infer=infer_by_running(eager), vjp=vjp,
    ))


_normalisation("softmax", _softmax, lambda xp, g, ans, ax: ans * (g - (g * ans).sum(axis=ax, keepdims=True)),
               "exp(x) / sum(exp(x)) over ``axis``, computed stably.")
_normalisation("log_softmax", _log_softmax, lambda xp, g, ans, ax: g - xp.exp(ans) * g.sum(axis=ax, keepdims=True),
               "x - logsumexp(x) over ``axis``, computed stably.")
