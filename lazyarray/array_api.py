"""The array API standard's namespace over lazyarray: ``x.__array_namespace__()`` returns this
module, so code written against the standard (``xp = array_api_compat.array_namespace(x)``)
records and batches in a scope as lazyarray's own functions do, and runs eagerly outside one.

It holds the standard's creation, elementwise, manipulation, searching, statistical and
utility functions that lazyarray can record, under the standard's names and signatures. A few
are compositions of operators (``var``, ``std``, ``flip``, ``unstack``, ``roll``, ``tensordot``,
...): they batch and carry gradients as those operators do. Functions whose
result shape depends on the values (``nonzero``, ``unique_*``) or that have no operator
(sorting, cumulative sums, rounding) are absent: a missing name fails where it is looked up,
never as a silent flush.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

import lazyarray as la

from .array import LazyArray

__array_api_version__ = "2023.12"

e, inf, nan, pi, newaxis = math.e, math.inf, math.nan, math.pi, None
# the dtypes are set at the end: ``bool`` here would hide the builtin from the code above it


def _no_device(name, device):
    if device not in (None, "cpu"):
        raise ValueError(f"{name}: lazyarray's device is its scope's backend, not {device!r}")


def _dtype(x):
    return x.dtype if x.__class__ is LazyArray else np.result_type(x)


# -- creation -------------------------------------------------------------------------------------
def asarray(obj, /, *, dtype=None, device=None, copy=None):
    _no_device("asarray", device)
    if obj.__class__ is LazyArray:
        return obj if dtype is None or np.dtype(dtype) == obj.dtype else la.astype(obj, dtype)
    return la.array(np.asarray(obj, dtype=dtype))


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    _no_device("arange", device)
    return la.array(np.arange(start, stop, step, dtype=dtype) if stop is not None else np.arange(start, dtype=dtype))


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    _no_device("linspace", device)
    return la.array(np.linspace(start, stop, num, dtype=dtype, endpoint=endpoint))


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    _no_device("eye", device)
    return la.array(np.eye(n_rows, n_cols, k=k, dtype=dtype))


def zeros(shape, *, dtype=None, device=None):
    _no_device("zeros", device)
    return la.zeros(shape, float if dtype is None else dtype)


def ones(shape, *, dtype=None, device=None):
    _no_device("ones", device)
    return la.ones(shape, float if dtype is None else dtype)


def full(shape, fill_value, *, dtype=None, device=None):
    _no_device("full", device)
    return la.full(shape, fill_value, dtype)


def zeros_like(x, /, *, dtype=None, device=None):
    _no_device("zeros_like", device)
    return la.zeros_like(x, dtype)


def ones_like(x, /, *, dtype=None, device=None):
    _no_device("ones_like", device)
    return la.ones_like(x, dtype)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    _no_device("full_like", device)
    return la.full_like(x, fill_value, dtype)


#: a LazyArray is never written to: "uninitialised" memory may as well be zeros
empty, empty_like = zeros, zeros_like


def _triangle(name, keep):
    def fn(x, /, *, k=0):
        n, m = x.shape[-2:]
        return la.where(keep(np.ones((n, m), np.bool_), k), x, la.zeros((), _dtype(x)))
    fn.__name__ = name
    return fn


tril, triu = _triangle("tril", np.tril), _triangle("triu", np.triu)


# -- elementwise ----------------------------------------------------------------------------------
abs, add, subtract, multiply, divide = la.abs, la.add, la.subtract, la.multiply, la.divide
floor_divide, remainder, pow, maximum, minimum = la.floor_divide, la.remainder, la.power, la.maximum, la.minimum
negative, positive, exp, log, log1p, sqrt, square = la.negative, la.positive, la.exp, la.log, la.log1p, la.sqrt, la.square
sin, cos, tan, tanh, sinh, cosh, where = la.sin, la.cos, la.tan, la.tanh, la.sinh, la.cosh, la.where
asin, acos, atan, asinh, acosh, atanh, atan2 = la.arcsin, la.arccos, la.arctan, la.arcsinh, la.arccosh, la.arctanh, la.arctan2
expm1, log2, log10, logaddexp, hypot = la.expm1, la.log2, la.log10, la.logaddexp, la.hypot
floor, ceil, trunc, sign = la.floor, la.ceil, la.trunc, la.sign
equal, not_equal, less, less_equal, greater, greater_equal = (
    la.equal, la.not_equal, la.less, la.less_equal, la.greater, la.greater_equal)
bitwise_and, bitwise_or, bitwise_xor, bitwise_invert = la.bitwise_and, la.bitwise_or, la.bitwise_xor, la.invert


def _truth(x):
    return x if _dtype(x) == np.bool_ else la.not_equal(x, 0)


def logical_and(x1, x2, /):
    return la.bitwise_and(_truth(x1), _truth(x2))


def logical_or(x1, x2, /):
    return la.bitwise_or(_truth(x1), _truth(x2))


def logical_xor(x1, x2, /):
    return la.bitwise_xor(_truth(x1), _truth(x2))


def logical_not(x, /):
    return la.invert(_truth(x))


def reciprocal(x, /):
    return la.divide(1.0, x)


def isnan(x, /):
    return la.not_equal(x, x)


def isinf(x, /):
    return la.equal(la.abs(x), inf)


def isfinite(x, /):
    return la.less(la.abs(x), inf)


def clip(x, /, min=None, max=None):
    if min is None and max is None:
        return la.copy(x)
    if min is None:
        return la.minimum(x, max)
    if max is None:
        return la.maximum(x, min)
    return la.clip(x, min, max)


# -- manipulation ---------------------------------------------------------------------------------
def astype(x, dtype, /, *, copy=True, device=None):
    _no_device("astype", device)
    return la.astype(x, dtype)


def broadcast_to(x, /, shape):
    return la.broadcast_to(x, tuple(shape))


def broadcast_arrays(*arrays):
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    return [la.broadcast_to(a, shape) for a in arrays]


def broadcast_shapes(*shapes):
    return np.broadcast_shapes(*shapes)


def meshgrid(*arrays, indexing="xy"):
    """Each 1-D array along its own axis, broadcast to the grid (the first two swapped for "xy")."""
    n = len(arrays)
    sizes = [a.shape[0] for a in arrays]
    axes = list(range(n))
    if indexing == "xy" and n > 1:
        axes[0], axes[1] = 1, 0
    shape = [0] * n
    for a, ax in zip(sizes, axes):
        shape[ax] = a
    return [la.broadcast_to(la.reshape(a, tuple(-1 if i == ax else 1 for i in range(n))), tuple(shape))
            for a, ax in zip(arrays, axes)]


def concat(arrays, /, *, axis=0):
    return la.concatenate(list(arrays), axis=axis)


def stack(arrays, /, *, axis=0):
    return la.stack(list(arrays), axis=axis)


def expand_dims(x, /, *, axis=0):
    return la.expand_dims(x, axis)


def squeeze(x, /, axis):
    return la.squeeze(x, axis)


def reshape(x, /, shape, *, copy=None):
    if copy is False:
        raise ValueError("reshape: copy=False (a guaranteed view) is not something lazyarray promises")
    return la.reshape(x, tuple(shape))


def permute_dims(x, /, axes):
    return la.transpose(x, tuple(axes))


def matrix_transpose(x, /):
    n = len(x.shape)
    if n < 2:
        raise la.ShapeError(f"matrix_transpose: needs rank >= 2, got shape {x.shape}")
    return la.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def moveaxis(x, source, destination, /):
    n = len(x.shape)
    src = [s % n for s in ((source,) if isinstance(source, int) else source)]
    dst = [d % n for d in ((destination,) if isinstance(destination, int) else destination)]
    order = [a for a in range(n) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return la.transpose(x, tuple(order))


def flip(x, /, *, axis=None):
    n = len(x.shape)
    axes = range(n) if axis is None else [a % n for a in ((axis,) if isinstance(axis, int) else axis)]
    return la.getitem(x, tuple(slice(None, None, -1) if a in axes else slice(None) for a in range(n)))


def unstack(x, /, *, axis=0):
    n = len(x.shape)
    lead = (slice(None),) * (axis % n)
    return tuple(la.getitem(x, lead + (i,)) for i in range(x.shape[axis]))


def roll(x, /, shift, *, axis=None):
    """Static shifts as a join of two slices per axis (x flattened when ``axis`` is None)."""
    if axis is None:
        return la.reshape(roll(la.ravel(x), shift, axis=0), x.shape)
    shifts, axes = ((shift,), (axis,)) if isinstance(axis, int) else (tuple(shift), tuple(axis))
    if isinstance(shift, int) and len(axes) > 1:
        shifts = (shift,) * len(axes)
    for k, ax in zip(shifts, axes):
        ax %= len(x.shape)
        n = x.shape[ax]
        k %= builtins.max(n, 1)
        if k:
            lead = (slice(None),) * ax
            x = la.concatenate([la.getitem(x, lead + (slice(n - k, None),)), la.getitem(x, lead + (slice(0, n - k),))],
                               axis=ax)
    return x


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = la.concatenate(parts, axis=axis)
    lead = (slice(None),) * (axis % len(x.shape))
    for _ in range(n):
        x = la.subtract(la.getitem(x, lead + (slice(1, None),)), la.getitem(x, lead + (slice(None, -1),)))
    return x


def tile(x, repetitions, /):
    return la.tile(x, tuple(repetitions))


def repeat(x, repeats, /, *, axis=None):
    return la.repeat(x, repeats, axis=axis)


def take(x, indices, /, *, axis=None):
    """``indices`` are per-call data (numpy arrays, lists, ints), or a LazyArray whose value is
    already there; a future's values cannot index while recording."""
    if indices.__class__ is LazyArray:
        value = indices._peek()
        if value is None:
            raise TypeError("take: indices that are a future (computed in the scope) cannot index while it "
                            "records; pass them as a numpy array")
        indices = value
    return la.take(x, indices, axis=axis)


# -- searching, statistics, utilities -------------------------------------------------------------
def argmax(x, /, *, axis=None, keepdims=False):
    return la.argmax(x, axis=axis, keepdims=keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    return la.argmin(x, axis=axis, keepdims=keepdims)


def _statistic(name):
    def fn(x, /, *, axis=None, keepdims=False, **dtype):
        if dtype.get("dtype") is not None:
            raise TypeError(f"{name}: a dtype of the accumulation is not supported; convert with astype first")
        return getattr(la, name)(x, axis=axis, keepdims=keepdims)
    fn.__name__ = name
    return fn


max, min, mean, sum, all, any = (_statistic(n) for n in ("max", "min", "mean", "sum", "all", "any"))


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """The mean squared deviation, over ``N - correction`` entries."""
    centred = la.subtract(x, la.mean(x, axis=axis, keepdims=True))
    shape = x.shape
    axes = range(len(shape)) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    n = math.prod(shape[a] for a in axes)
    return la.multiply(la.mean(la.square(centred), axis=axis, keepdims=keepdims), n / builtins.max(n - correction, 0))


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return la.sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


def count_nonzero(x, /, *, axis=None, keepdims=False):
    return la.sum(la.astype(la.not_equal(x, 0), np.int64), axis=axis, keepdims=keepdims)


# -- linear algebra -------------------------------------------------------------------------------
matmul = la.matmul
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def tensordot(x1, x2, /, *, axes=2):
    """As one einsum: the contracted axes of x1 and x2 share letters."""
    n1, n2 = len(x1.shape), len(x2.shape)
    if isinstance(axes, int):
        a1, a2 = list(range(n1 - axes, n1)), list(range(axes))
    else:
        a1, a2 = [a % n1 for a in axes[0]], [a % n2 for a in axes[1]]
    s1 = _LETTERS[:n1]
    s2 = [None] * n2
    for i, j in zip(a1, a2):
        s2[j] = s1[i]
    rest = iter(_LETTERS[n1:])
    s2 = "".join(c if c is not None else next(rest) for c in s2)
    out = "".join(c for i, c in enumerate(s1) if i not in a1) + "".join(c for j, c in enumerate(s2) if j not in a2)
    return la.einsum(f"{s1},{s2}->{out}", x1, x2)


def vecdot(x1, x2, /, *, axis=-1):
    if np.dtype(_dtype(x1)).kind == "c":
        raise TypeError("vecdot: complex operands (which conjugate x1) are not supported")
    return la.sum(la.multiply(x1, x2), axis=axis)


# -- data types -----------------------------------------------------------------------------------
def result_type(*arrays_and_dtypes):
    return np.result_type(*(a.dtype if a.__class__ is LazyArray else a for a in arrays_and_dtypes))


def can_cast(from_, to, /):
    return np.can_cast(from_.dtype if from_.__class__ is LazyArray else from_, to)


def finfo(type, /):
    return np.finfo(type.dtype if type.__class__ is LazyArray else type)


def iinfo(type, /):
    return np.iinfo(type.dtype if type.__class__ is LazyArray else type)


isdtype = np.isdtype

globals().update({"bool": np.dtype(np.bool_), **{n: np.dtype(n) for n in (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128")}})
