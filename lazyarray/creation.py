"""Arrays made from values: parameters (shared operands), per-instance data and filled
constants, eager outside a scope and recorded inside one."""
from __future__ import annotations

import operator

import numpy as np

from ops_registry import ShapeError

from .array import LazyArray, check_numeric, new_parameter, scalar_key
from .grad.leaf import Leaf
from .scope import current


def parameter(value, name=None, requires_grad=None) -> LazyArray:
    """A shared operand (weights, embedding tables): keyed by identity in signatures, so many
    ``W @ x_i`` batch into one ``W @ X``. ``name`` labels it in ``explain()``, policies and
    saved files. A float parameter gets a gradient from ``loss.backward()`` (``p.grad``)
    unless ``requires_grad=False``; it is updated in place (``la.optim``), never rebound.
    Other dtypes are constants: asking for their gradient is an error, as in PyTorch."""
    value = _host_or_device(value)
    if requires_grad and np.dtype(value.dtype).kind != "f":
        raise TypeError(f"la.parameter(..., requires_grad=True): only float parameters have gradients, not "
                        f"{np.dtype(value.dtype)}; leave requires_grad out for a constant parameter")
    return new_parameter(value, name, requires_grad is not False)


def array(value, grad=False) -> LazyArray:
    """Per-instance data: stacked with its peers when used inside a scope. A copy, as
    ``np.array``: a recorded op reads it later, when the scope runs, and must see the value
    the eager call would have seen, not what a reused buffer holds by then. ``grad=True``:
    a backward also computes its gradient (``x.grad``), as for a parameter."""
    value = value.copy() if hasattr(value, "__cuda_array_interface__") else np.array(value)
    leaf = Leaf(value, True) if grad else None
    if leaf is not None and not leaf.requires_grad:
        raise TypeError(f"la.array(..., grad=True): only float values have gradients, not {value.dtype}")
    scope = current()
    if scope is not None:
        handle = scope.input(value)     # its class is checked numeric when first interned
        if leaf is not None:
            scope.ask_grad(handle, leaf)
        return handle
    check_numeric(value.dtype)
    return LazyArray(leaf, 0, -1, value)


#: (backend, shape, dtype, fill) -> the constant a scope uses for ``la.full`` and friends; at
#: most ``_MAX_CONSTANTS`` (a program that varies the fill per call starts over past that)
_CONSTANTS: dict = {}
_MAX_CONSTANTS = 1024


def full(shape, fill_value, dtype=None) -> LazyArray:
    """An array of ``shape`` filled with ``fill_value`` (a number; dtype as ``np.full``'s).

    Outside a scope a fresh array. Inside one, a constant known at record time: a read-only
    parameter without a gradient, the same object for every call of the same shape, dtype and
    fill, so it is a shared operand (broadcast, never stacked per call) and a cell body may
    use it (a traced body refuses other arrays it did not get as arguments)."""
    if fill_value.__class__ is LazyArray or not isinstance(fill_value, (int, float, complex, np.generic)):
        raise TypeError(f"la.full: fill_value must be a number, got {type(fill_value).__name__}")
    dims = _dims(shape)
    dtype = np.result_type(fill_value) if dtype is None else np.dtype(dtype)
    check_numeric(dtype)
    scope = current()
    if scope is None:
        return LazyArray(None, 0, -1, np.full(dims, fill_value, dtype))
    key = (scope.backend.name, dims, dtype.str, scalar_key(fill_value))
    constant = _CONSTANTS.get(key)
    if constant is None:
        value = np.full(dims, fill_value, dtype)
        value.flags.writeable = False       # shared by every call: nothing may write into it
        if len(_CONSTANTS) >= _MAX_CONSTANTS:
            _CONSTANTS.clear()
        constant = _CONSTANTS[key] = new_parameter(
            scope.backend.to_device(value), f"full({dims}, {fill_value!r}, {dtype})", requires_grad=False)
    return constant


def _dims(shape) -> tuple:
    try:
        dims = (operator.index(shape),) if np.ndim(shape) == 0 else tuple(operator.index(d) for d in shape)
    except TypeError:
        dims = None
    if dims is None or [d for d in dims if d < 0]:     # (this module's any is la.any)
        raise ShapeError(f"la.full: a shape is non-negative integers, got {shape!r}")
    return dims


def zeros(shape, dtype=float) -> LazyArray:
    """``np.zeros``: see ``la.full`` (a shared constant inside a scope, usable in a cell body)."""
    return full(shape, 0, dtype)


def ones(shape, dtype=float) -> LazyArray:
    """``np.ones``: see ``la.full`` (a shared constant inside a scope, usable in a cell body)."""
    return full(shape, 1, dtype)


def full_like(x, fill_value, dtype=None, shape=None) -> LazyArray:
    """``la.full`` of the shape and dtype of ``x`` (known at record time for a future)."""
    return full(np.shape(x) if shape is None else shape, fill_value,
                (x.dtype if x.__class__ is LazyArray else np.result_type(x)) if dtype is None else dtype)


def zeros_like(x, dtype=None, shape=None) -> LazyArray:
    """``la.full_like(x, 0)``: a shared constant inside a scope."""
    return full_like(x, 0, dtype, shape)


def ones_like(x, dtype=None, shape=None) -> LazyArray:
    """``la.full_like(x, 1)``: a shared constant inside a scope."""
    return full_like(x, 1, dtype, shape)


def _host_or_device(value):
    """Device arrays (cupy) stay where they are; anything else becomes a numpy array."""
    return value if hasattr(value, "__cuda_array_interface__") else np.asarray(value)
