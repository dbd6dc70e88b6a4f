"""Reductions and normalisations over an axis; the batch axis is never reduced."""
from __future__ import annotations

import numpy as np

from .kernels import infer_by_running, shift_axes
from .opdef import ARRAY, OpDef, declare


def _reduction_vjp(name):
    """g spread back over the reduced axes: as it is (sum), divided by their size (mean), onto
    the maxima, shared evenly between ties (max)."""
    def vjp(xp, stacked, needs, g, ans, x, axis=None, keepdims=False):
        axes = shift_axes(axis, x.ndim - 1)
        axes = tuple(sorted(axes)) if isinstance(axes, tuple) else (axes,)
        if not keepdims:
            g, ans = xp.expand_dims(g, axes), xp.expand_dims(ans, axes)
        if name == "sum":
            return (xp.broadcast_to(g, x.shape),)
        if name == "mean":
            return (xp.broadcast_to(g / max(1, int(np.prod([x.shape[a] for a in axes]))), x.shape),)
        hit = (x == ans).astype(g.dtype)
        return (hit * (g / hit.sum(axis=axes, keepdims=True)),)
    return vjp


def _reduction(name, doc):
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
        eager=eager, batched=batched, infer=infer_by_running(eager), methods=(name,), vjp=_reduction_vjp(name),
    ))


_reduction("sum", "Sum over ``axis`` (all axes when None).")
_reduction("mean", "Mean over ``axis`` (all axes when None).")
_reduction("max", "Maximum over ``axis`` (all axes when None).")


def _log_softmax(xp, x, axis):
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


def _softmax(xp, x, axis):
    e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
    return e / xp.sum(e, axis=axis, keepdims=True)


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
