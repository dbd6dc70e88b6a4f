"""numpy's ufuncs and functions on LazyArrays (NEP 13 ``__array_ufunc__``, NEP 18
``__array_function__``), as cupy and dask take them: ``np.tanh(x)``, ``np.concatenate([...])``,
``np.where(...)`` call the lazyarray operator of the same meaning, recorded inside a scope and
run at once outside one, and return LazyArrays. They used to convert the LazyArray with
``__array__``: a silent flush per call inside a scope, and the rest of the computation unbatched.

What lazyarray has no operator for runs on the values where no flush is needed (concrete
values, futures already computed: numpy's own result), and raises a TypeError naming the
function where it would flush a scope: never a silent flush. Forcing stays explicit:
``np.asarray(x)``, ``float(x)``, ``x.asnumpy()``.
"""
from __future__ import annotations

import numpy as np

from ops_registry import REGISTRY

from . import creation
from .array import LazyArray
from .ops import FUNCTIONS
from .wrappers import einsum, split

#: numpy ufuncs by name -> the operator of that name, and numpy's other names for them
_ALIASES = {"absolute": "abs", "true_divide": "divide", "mod": "remainder", "amax": "max", "max": "max"}
UFUNCS = {name: FUNCTIONS[name] for name in REGISTRY
          if isinstance(getattr(np, name, None), np.ufunc) and name in FUNCTIONS}
UFUNCS.update({alias: FUNCTIONS[name] for alias, name in _ALIASES.items()
               if isinstance(getattr(np, alias, None), np.ufunc) and name in FUNCTIONS})
_REDUCE = {"add": "sum", "maximum": "max", "minimum": "min", "logical_or": "any", "logical_and": "all"}


def _refuse(name, given, defaults):
    """numpy's parameters lazyarray does not take: a TypeError naming them, unless at their default."""
    odd = sorted(k for k, v in given.items() if k in defaults and v is not defaults[k] and v != defaults[k])
    unknown = sorted(k for k in given if k not in defaults)
    if odd or unknown:
        raise TypeError(f"np.{name} on LazyArrays: {', '.join(odd + unknown)} not supported (lazyarray "
                        "computes a new value; convert with np.asarray(x) first to use numpy's)")


def _unforced(values) -> bool:
    """Whether any of ``values`` (nested in lists and tuples) is a future not computed yet."""
    for v in values:
        if v.__class__ is LazyArray:
            if v._peek() is None:
                return True
        elif isinstance(v, (list, tuple)) and _unforced(v):
            return True
    return False


def _to_numpy(v):
    if v.__class__ is LazyArray:
        return v.asnumpy()
    if isinstance(v, (list, tuple)):
        return type(v)(_to_numpy(x) for x in v)
    return v


def _fallback(name, func, args, kwargs):
    """numpy's own result on the values, where none of them needs a flush; else a TypeError."""
    if _unforced(args) or _unforced(kwargs.values()):
        raise TypeError(f"np.{name} is not an operation lazyarray records, and calling it here would run the "
                        f"scope's recording (a silent flush): use a lazyarray operator (la.*), or force the "
                        f"value explicitly first (np.asarray(x), x.asnumpy())")
    return func(*_to_numpy(args), **{k: _to_numpy(v) for k, v in kwargs.items()})


_BY_UFUNC = {getattr(np, name): fn for name, fn in UFUNCS.items()}


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    if method == "__call__" and not kwargs:     # the common call first: it is per op recorded
        fn = _BY_UFUNC.get(ufunc)
        if fn is not None:
            return fn(*inputs)
    name = ufunc.__name__
    if method == "__call__":
        fn = UFUNCS.get(name)
        if fn is not None and set(kwargs) <= {"out"} and kwargs["out"] is None:
            return fn(*inputs)
    elif method == "reduce" and _REDUCE.get(name) in FUNCTIONS and len(inputs) == 1:
        axis, keepdims = kwargs.pop("axis", 0), kwargs.pop("keepdims", False)
        _refuse(f"{name}.reduce", kwargs, {"dtype": None, "out": None})
        return FUNCTIONS[_REDUCE[name]](inputs[0], axis=axis, keepdims=keepdims)
    return _fallback(name if method == "__call__" else f"{name}.{method}", getattr(ufunc, method), inputs, kwargs)


def _reduction(name):
    """numpy's signature: sum and mean take a dtype third, the others an out."""
    if name in ("sum", "mean"):
        def call(a, axis=None, dtype=None, out=None, keepdims=False, **more):
            _refuse(name, {"dtype": dtype, "out": out, **more}, {"dtype": None, "out": None, "initial": np._NoValue,
                                                                 "where": True})
            return FUNCTIONS[name](a, axis=axis, keepdims=keepdims)
    else:
        def call(a, axis=None, out=None, keepdims=False, **more):
            _refuse(name, {"out": out, **more}, {"out": None, "initial": np._NoValue, "where": True})
            return FUNCTIONS[name](a, axis=axis, keepdims=keepdims)
    return call


def _arg_extremum(name):
    def call(a, axis=None, out=None, *, keepdims=False):
        _refuse(name, {"out": out}, {"out": None})
        return FUNCTIONS[name](a, axis=axis, keepdims=keepdims)
    return call


def _clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue, max=np._NoValue, **kwargs):
    """numpy 2's spellings of the bounds; a missing (None) one is a maximum or minimum alone."""
    _refuse("clip", {"out": out, **kwargs}, {"out": None})
    lo = min if a_min is np._NoValue else a_min
    hi = max if a_max is np._NoValue else a_max
    lo, hi = (None if b is np._NoValue else b for b in (lo, hi))
    if lo is None and hi is None:
        return FUNCTIONS["copy"](a)
    if lo is None:
        return FUNCTIONS["minimum"](a, hi)
    if hi is None:
        return FUNCTIONS["maximum"](a, lo)
    return FUNCTIONS["clip"](a, lo, hi)


def _join(name):
    def call(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
        _refuse(name, {"out": out, "dtype": dtype, "casting": casting},
                {"out": None, "dtype": None, "casting": "same_kind"})
        return FUNCTIONS[name](list(arrays), axis=axis)
    return call


def _reshape(a, shape=None, order="C", newshape=None, copy=None):
    _refuse("reshape", {"order": order, "copy": copy}, {"order": "C", "copy": None})
    return FUNCTIONS["reshape"](a, shape if shape is not None else newshape)


def _split(ary, indices_or_sections, axis=0):
    return split(ary, indices_or_sections, axis=axis)


def _einsum(subscripts, *operands, out=None, optimize=False, **more):
    """numpy's ``optimize`` only picks a contraction order: lazyarray picks its own."""
    _refuse("einsum", {"out": out, **more}, {"out": None, "dtype": None, "order": "K", "casting": "safe"})
    return einsum(subscripts, *operands)


def _ravel(a, order="C"):
    _refuse("ravel", {"order": order}, {"order": "C"})
    return FUNCTIONS["ravel"](a)


def _copy(a, order="K", subok=False):
    _refuse("copy", {"order": order}, {"order": "K"})
    return FUNCTIONS["copy"](a)


def _astype(x, dtype, /, *, copy=True, device=None):
    _refuse("astype", {"device": device}, {"device": None})
    return FUNCTIONS["astype"](x, dtype)


def _broadcast_to(array, shape, subok=False):
    return FUNCTIONS["broadcast_to"](array, shape)


def _where(condition, *xy):
    if len(xy) != 2:
        raise TypeError("np.where(condition) on a LazyArray (the indices where it is true) has a shape that "
                        "depends on the values: lazyarray takes np.where(condition, x, y) only")
    return FUNCTIONS["where"](condition, *xy)


def _dot(a, b, out=None):
    _refuse("dot", {"out": out}, {"out": None})
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise TypeError("np.dot of operands of rank > 2 differs from matmul: use la.matmul (the @ operator), "
                        "which lazyarray records")
    return FUNCTIONS["matmul"](a, b)


def _take(a, indices, axis=None, out=None, mode="raise"):
    _refuse("take", {"out": out, "mode": mode}, {"out": None, "mode": "raise"})
    return FUNCTIONS["take"](a, indices, axis=axis)


def _transpose(a, axes=None):
    return FUNCTIONS["transpose"](a, None if axes is None else tuple(axes))


def _like(name):
    """np.zeros_like and friends: a constant of the LazyArray's shape and dtype (``la.full``)."""
    def call(a, *fill, dtype=None, order="K", subok=True, shape=None, device=None):
        _refuse(name, {"order": order, "device": device}, {"order": "K", "device": None})
        return getattr(creation, name)(a, *fill, dtype=dtype, shape=shape)
    return call


def _metadata(get):
    return lambda a, *args, **kwargs: get(a) if a.__class__ is LazyArray else get(np.asarray(a))


FUNCTIONS_NP = {
    np.concatenate: _join("concatenate"), np.stack: _join("stack"), np.reshape: _reshape, np.split: _split,
    np.transpose: _transpose, np.where: _where, np.dot: _dot, np.take: _take,
    np.sum: _reduction("sum"), np.mean: _reduction("mean"), np.max: _reduction("max"), np.amax: _reduction("max"),
    np.min: _reduction("min"), np.amin: _reduction("min"), np.any: _reduction("any"), np.all: _reduction("all"),
    np.argmax: _arg_extremum("argmax"), np.argmin: _arg_extremum("argmin"), np.clip: _clip,
    np.expand_dims: FUNCTIONS["expand_dims"], np.squeeze: FUNCTIONS["squeeze"], np.repeat: FUNCTIONS["repeat"],
    np.tile: FUNCTIONS["tile"], np.ravel: _ravel, np.copy: _copy, np.astype: _astype, np.broadcast_to: _broadcast_to,
    np.einsum: _einsum, np.zeros_like: _like("zeros_like"), np.ones_like: _like("ones_like"), np.full_like: _like("full_like"),
    np.shape: _metadata(lambda a: a.shape), np.ndim: _metadata(lambda a: a.ndim), np.size: _metadata(lambda a: a.size),
}


def array_function(self, func, types, args, kwargs):
    if not all(issubclass(t, (LazyArray, np.ndarray)) for t in types):
        return NotImplemented
    call = FUNCTIONS_NP.get(func)
    if call is not None:
        return call(*args, **kwargs)
    return _fallback(func.__name__, func, args, kwargs)


LazyArray.__array_ufunc__ = array_ufunc
LazyArray.__array_function__ = array_function
