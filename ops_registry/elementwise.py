"""Elementwise math and comparisons with numpy broadcasting; batched kernels are derived."""
from __future__ import annotations

import numpy as np
import scipy.special

from .gradients import no_gradient, unbroadcast
from .kernels import elementwise, infer_by_running
from .opdef import ARRAY, OpDef, declare


def _special(xp):
    """scipy.special for numpy, cupyx.scipy.special for cupy (one-pass, stable expit)."""
    if xp is np:
        return scipy.special
    import cupyx.scipy.special  # pragma: no cover - GPU machines only
    return cupyx.scipy.special


def _relu(xp, x, out=None):
    return xp.maximum(x, 0, out=out)


def _sigmoid(xp, x, out=None):
    """numpy floats: (1 + tanh(x / 2)) / 2 in place, ~4x faster than expit on float32 and as
    accurate; cupy's expit is already one fused kernel."""
    dtype = x.dtype if x.__class__ is np.ndarray else np.result_type(x)    # (result_type: ~0.07 µs)
    if xp is not np or dtype.kind != "f":
        return _special(xp).expit(x, out=out)
    half = np.multiply(x, dtype.type(0.5)) if out is None else np.multiply(x, dtype.type(0.5), out=out)
    if half.ndim == 0:
        return dtype.type((1 + np.tanh(half)) * 0.5)
    np.tanh(half, out=half)
    half += 1
    half *= 0.5
    return half


def _ufunc(name):
    ufunc = getattr(np, name)

    def fn(xp, *ops, out=None):     # numpy's ufunc bound once: eager calls pay ~0.1 µs less
        f = ufunc if xp is np else getattr(xp, name)
        return f(*ops) if out is None else f(*ops, out=out)

    fn.__name__ = name
    return fn


def _declare(name, fn, operands, doc, local=None, methods=(), reflected=(), heavy=False, ufunc=False):
    """``local``: per operand, its gradient where operands align (``OpDef.vjp_aligned``);
    None: no gradient (comparisons, bitwise ops). ``ufunc``: ``fn`` is ``_ufunc(name)``."""
    declare(OpDef(
        name=name, doc=doc, operands=tuple((o, ARRAY) for o in operands),
        eager=fn, batched=elementwise(fn),
        infer=infer_by_running(fn),
        methods=methods, reflected=reflected, elementwise=True, heavy=heavy,
        vjp=no_gradient if local is None else _aligned_rule(local), vjp_aligned=local,
        numpy=name if ufunc else None,
    ))


def _aligned_rule(local):
    """The rule of an elementwise op from its aligned one: operands aligned as the batched
    kernel paired them (lower-rank stacked operands get singleton axes after the batch axis),
    each gradient then summed down to its operand's shape (broadcasting undone)."""
    def vjp(xp, stacked, needs, g, ans, *operands):
        aligned = _aligned(stacked, operands) if len(operands) > 1 else operands
        return tuple(unbroadcast(xp, f(xp, g, ans, *aligned), x, s) if need else None
                     for f, x, s, need in zip(local, operands, stacked, needs))
    return vjp


def _aligned(stacked, operands):
    from .kernels import align, per_instance_rank
    return align(stacked, operands, per_instance_rank(stacked, operands))


def _power_base(xp, g, ans, a, b):
    with np.errstate(all="ignore"):
        return g * b * xp.power(a, b - 1)


def _power_exponent(xp, g, ans, a, b):
    """d/db a**b = a**b log a; 0 where a == 0 (the limit for b > 0, as torch takes it)."""
    with np.errstate(all="ignore"):
        return xp.where(a == 0, 0, g * ans * xp.log(xp.where(a == 0, 1, a)))


def _extremum(pick):
    """maximum / minimum: the gradient goes to the operand that won, split evenly on ties."""
    def share(xp, g, a, b):
        return xp.where(pick(a, b), 1.0, xp.where(a == b, 0.5, 0.0)).astype(g.dtype)
    return (lambda xp, g, ans, a, b: g * share(xp, g, a, b),
            lambda xp, g, ans, a, b: g * (1 - share(xp, g, a, b)))


def _sign(xp, x):
    """d|x|/dx as the rules chain it: sign(x), and conj(x) / |x| for complex x (holomorphic
    rules multiply by f'(z) unconjugated, so the real-valued |z| conjugates, as in autograd)."""
    return xp.conj(xp.sign(x)).astype(x.dtype, copy=False)


def _zero(xp, g, ans, *operands):
    return xp.zeros_like(g)


#: each operator's gradient where operands align (OpDef.vjp_aligned), beside its declaration
_UNARY = {
    "negative": lambda xp, g, ans, x: -g,
    "positive": lambda xp, g, ans, x: g,
    "abs": lambda xp, g, ans, x: g * _sign(xp, x),
    "exp": lambda xp, g, ans, x: g * ans,
    "log": lambda xp, g, ans, x: g / x,
    "log1p": lambda xp, g, ans, x: g / (1 + x),
    "sin": lambda xp, g, ans, x: g * xp.cos(x),
    "cos": lambda xp, g, ans, x: -g * xp.sin(x),
    "tan": lambda xp, g, ans, x: g * (1 + ans * ans),
    "expm1": lambda xp, g, ans, x: g * (ans + 1),
    "log2": lambda xp, g, ans, x: g / (x * np.log(2)),
    "log10": lambda xp, g, ans, x: g / (x * np.log(10)),
    "sinh": lambda xp, g, ans, x: g * xp.cosh(x),
    "cosh": lambda xp, g, ans, x: g * xp.sinh(x),
    "arcsin": lambda xp, g, ans, x: g / xp.sqrt(1 - x * x),
    "arccos": lambda xp, g, ans, x: -g / xp.sqrt(1 - x * x),
    "arctan": lambda xp, g, ans, x: g / (1 + x * x),
    "arcsinh": lambda xp, g, ans, x: g / xp.sqrt(x * x + 1),
    "arccosh": lambda xp, g, ans, x: g / xp.sqrt(x * x - 1),
    "arctanh": lambda xp, g, ans, x: g / (1 - x * x),
    # piecewise constant: zero almost everywhere
    "floor": _zero, "ceil": _zero, "trunc": _zero, "sign": _zero,
    "sqrt": lambda xp, g, ans, x: g / (2 * ans),
    "square": lambda xp, g, ans, x: g * (2 * x),
    "tanh": lambda xp, g, ans, x: g * (1 - ans * ans),
    "sigmoid": lambda xp, g, ans, x: g * ans * (1 - ans),
    "relu": lambda xp, g, ans, x: g * (x > 0),
}

for _name, _doc, _methods in [
    ("negative", "Elementwise -x.", ("__neg__",)),
    ("positive", "Elementwise +x.", ("__pos__",)),
    ("invert", "Elementwise ~x: logical not of bools, bitwise not of integers.", ("__invert__",)),
    ("abs", "Elementwise |x|.", ("__abs__",)),
    ("exp", "Elementwise e**x.", ()),
    ("log", "Elementwise natural logarithm.", ()),
    ("log1p", "Elementwise log(1 + x), accurate for small x.", ()),
    ("sin", "Elementwise sine.", ()),
    ("cos", "Elementwise cosine.", ()),
    ("tan", "Elementwise tangent.", ()),
    ("expm1", "Elementwise e**x - 1, accurate for small x.", ()),
    ("log2", "Elementwise base-2 logarithm.", ()),
    ("log10", "Elementwise base-10 logarithm.", ()),
    ("sinh", "Elementwise hyperbolic sine.", ()),
    ("cosh", "Elementwise hyperbolic cosine.", ()),
    ("arcsin", "Elementwise inverse sine (the array API's asin).", ()),
    ("arccos", "Elementwise inverse cosine (the array API's acos).", ()),
    ("arctan", "Elementwise inverse tangent (the array API's atan).", ()),
    ("arcsinh", "Elementwise inverse hyperbolic sine (the array API's asinh).", ()),
    ("arccosh", "Elementwise inverse hyperbolic cosine (the array API's acosh).", ()),
    ("arctanh", "Elementwise inverse hyperbolic tangent (the array API's atanh).", ()),
    ("floor", "Elementwise largest integer <= x (numpy's dtype rules).", ()),
    ("ceil", "Elementwise smallest integer >= x (numpy's dtype rules).", ()),
    ("trunc", "Elementwise x rounded towards zero (numpy's dtype rules).", ()),
    ("sign", "Elementwise -1, 0 or 1 (x / |x| for complex x, as numpy 2).", ()),
    ("sqrt", "Elementwise square root.", ()),
    ("square", "Elementwise x**2.", ()),
    ("tanh", "Elementwise hyperbolic tangent.", ()),
]:
    _local = _UNARY.get(_name)
    _declare(_name, _ufunc(_name), ("x",), _doc, _local and (_local,), _methods, ufunc=True)

_declare("sigmoid", _sigmoid, ("x",), "Elementwise logistic sigmoid 1 / (1 + e**-x), computed stably.",
         (_UNARY["sigmoid"],))
_declare("relu", _relu, ("x",), "Elementwise max(x, 0).", (_UNARY["relu"],))

_BINARY = {
    "add": (lambda xp, g, ans, a, b: g, lambda xp, g, ans, a, b: g),
    "subtract": (lambda xp, g, ans, a, b: g, lambda xp, g, ans, a, b: -g),
    "multiply": (lambda xp, g, ans, a, b: g * b, lambda xp, g, ans, a, b: g * a),
    "divide": (lambda xp, g, ans, a, b: g / b, lambda xp, g, ans, a, b: -g * ans / b),
    # a // b is piecewise constant: zero almost everywhere; a % b = a - b * (a // b)
    "floor_divide": (_zero, _zero),
    "remainder": (lambda xp, g, ans, a, b: g, lambda xp, g, ans, a, b: -g * xp.floor_divide(a, b)),
    "power": (_power_base, _power_exponent),
    "arctan2": (lambda xp, g, ans, a, b: g * b / (a * a + b * b), lambda xp, g, ans, a, b: -g * a / (a * a + b * b)),
    "hypot": (lambda xp, g, ans, a, b: g * a / ans, lambda xp, g, ans, a, b: g * b / ans),
    "logaddexp": (lambda xp, g, ans, a, b: g * xp.exp(a - ans), lambda xp, g, ans, a, b: g * xp.exp(b - ans)),
    "maximum": _extremum(lambda a, b: a > b),
    "minimum": _extremum(lambda a, b: a < b),
}

for _name, _doc, _methods, _reflected in [
    ("add", "Elementwise a + b with broadcasting.", ("__add__",), ("__radd__",)),
    ("subtract", "Elementwise a - b with broadcasting.", ("__sub__",), ("__rsub__",)),
    ("multiply", "Elementwise a * b with broadcasting.", ("__mul__",), ("__rmul__",)),
    ("divide", "Elementwise a / b with broadcasting.", ("__truediv__",), ("__rtruediv__",)),
    ("floor_divide", "Elementwise a // b with broadcasting.", ("__floordiv__",), ("__rfloordiv__",)),
    ("remainder", "Elementwise a % b with broadcasting (the sign of b, as numpy).", ("__mod__",), ("__rmod__",)),
    ("power", "Elementwise a ** b with broadcasting.", ("__pow__",), ("__rpow__",)),
    ("arctan2", "Elementwise angle of the point (b, a), with broadcasting (the array API's atan2).", (), ()),
    ("hypot", "Elementwise sqrt(a**2 + b**2) without overflow, with broadcasting.", (), ()),
    ("logaddexp", "Elementwise log(e**a + e**b), computed stably, with broadcasting.", (), ()),
    ("maximum", "Elementwise maximum with broadcasting (ties share the gradient).", (), ()),
    ("minimum", "Elementwise minimum with broadcasting (ties share the gradient).", (), ()),
    ("bitwise_and", "Elementwise a & b: logical and of bools (masks), bitwise of integers.", ("__and__",), ("__rand__",)),
    ("bitwise_or", "Elementwise a | b: logical or of bools, bitwise of integers.", ("__or__",), ("__ror__",)),
    ("bitwise_xor", "Elementwise a ^ b: logical xor of bools, bitwise of integers.", ("__xor__",), ("__rxor__",)),
    ("equal", "Elementwise a == b (bool).", ("__eq__",), ()),
    ("not_equal", "Elementwise a != b (bool).", ("__ne__",), ()),
    ("less", "Elementwise a < b (bool).", ("__lt__",), ()),
    ("less_equal", "Elementwise a <= b (bool).", ("__le__",), ()),
    ("greater", "Elementwise a > b (bool).", ("__gt__",), ()),
    ("greater_equal", "Elementwise a >= b (bool).", ("__ge__",), ()),
]:
    _declare(_name, _ufunc(_name), ("a", "b"), _doc, _BINARY.get(_name), _methods, _reflected, ufunc=True)


def _where(xp, cond, a, b, out=None):
    if out is None:
        return xp.where(cond, a, b)
    out[...] = xp.where(cond, a, b)
    return out


_declare("where", _where, ("condition", "a", "b"), "Elementwise choice: a where condition, else b.",
         (_zero, lambda xp, g, ans, c, a, b: xp.where(c, g, 0), lambda xp, g, ans, c, a, b: xp.where(c, 0, g)))


def _clip(xp, x, lo, hi, out=None):
    if lo is None or hi is None:    # a scope refuses None (not a number) as it records the call
        raise TypeError("clip takes both bounds (numbers or arrays; +-inf for none)")
    return xp.clip(x, lo, hi, out=out)


#: numpy's clip is minimum(maximum(x, lo), hi): the gradient goes to hi where that clipped,
#: else to x or lo, whichever the maximum took
_CLIP = (lambda xp, g, ans, x, lo, hi: g * ((xp.maximum(x, lo) <= hi) & (x >= lo)),
         lambda xp, g, ans, x, lo, hi: g * ((xp.maximum(x, lo) <= hi) & (x < lo)),
         lambda xp, g, ans, x, lo, hi: g * (xp.maximum(x, lo) > hi))

_declare("clip", _clip, ("x", "a_min", "a_max"), "Elementwise x limited to [a_min, a_max] (a_max where a_min > a_max, "
         "as numpy).", _CLIP, ("clip",))
