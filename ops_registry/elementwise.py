"""Elementwise math and comparisons with numpy broadcasting; batched kernels are derived."""
from __future__ import annotations

import numpy as np
import scipy.special

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
    if xp is not np or np.result_type(x).kind != "f":
        return _special(xp).expit(x, out=out)
    half = np.multiply(x, np.result_type(x).type(0.5), out=out)
    if half.ndim == 0:
        return np.result_type(x).type((1 + np.tanh(half)) * 0.5)
    np.tanh(half, out=half)
    half += 1
    half *= 0.5
    return half


def _ufunc(name):
    def fn(xp, *ops, out=None):
        return getattr(xp, name)(*ops, out=out)

    fn.__name__ = name
    return fn


def _declare(name, fn, operands, doc, methods=(), reflected=(), heavy=False):
    declare(OpDef(
        name=name, doc=doc, operands=tuple((o, ARRAY) for o in operands),
        eager=fn, batched=elementwise(fn),
        infer=infer_by_running(fn),
        methods=methods, reflected=reflected, elementwise=True, heavy=heavy,
    ))


for _name, _doc, _methods in [
    ("negative", "Elementwise -x.", ("__neg__",)),
    ("positive", "Elementwise +x.", ("__pos__",)),
    ("invert", "Elementwise ~x: logical not of bools, bitwise not of integers.", ("__invert__",)),
    ("abs", "Elementwise |x|.", ("__abs__",)),
    ("exp", "Elementwise e**x.", ()),
    ("log", "Elementwise natural logarithm.", ()),
    ("sqrt", "Elementwise square root.", ()),
    ("square", "Elementwise x**2.", ()),
    ("tanh", "Elementwise hyperbolic tangent.", ()),
]:
    _declare(_name, _ufunc(_name), ("x",), _doc, _methods)

_declare("sigmoid", _sigmoid, ("x",), "Elementwise logistic sigmoid 1 / (1 + e**-x), computed stably.")
_declare("relu", _relu, ("x",), "Elementwise max(x, 0).")

for _name, _doc, _methods, _reflected in [
    ("add", "Elementwise a + b with broadcasting.", ("__add__",), ("__radd__",)),
    ("subtract", "Elementwise a - b with broadcasting.", ("__sub__",), ("__rsub__",)),
    ("multiply", "Elementwise a * b with broadcasting.", ("__mul__",), ("__rmul__",)),
    ("divide", "Elementwise a / b with broadcasting.", ("__truediv__",), ("__rtruediv__",)),
    ("floor_divide", "Elementwise a // b with broadcasting.", ("__floordiv__",), ("__rfloordiv__",)),
    ("remainder", "Elementwise a % b with broadcasting (the sign of b, as numpy).", ("__mod__",), ("__rmod__",)),
    ("power", "Elementwise a ** b with broadcasting.", ("__pow__",), ("__rpow__",)),
    ("maximum", "Elementwise maximum with broadcasting.", (), ()),
    ("minimum", "Elementwise minimum with broadcasting.", (), ()),
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
    _declare(_name, _ufunc(_name), ("a", "b"), _doc, _methods, _reflected)


def _where(xp, cond, a, b, out=None):
    if out is None:
        return xp.where(cond, a, b)
    out[...] = xp.where(cond, a, b)
    return out


_declare("where", _where, ("condition", "a", "b"), "Elementwise choice: a where condition, else b.")
