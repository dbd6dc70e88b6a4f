"""lazyarray: write a dynamic network per instance over numpy-like arrays; inside
``with la.batching():`` calls are recorded, grouped into batches of equal signature and run as
batched kernels. Outside a scope every call runs eagerly with the same results."""
from __future__ import annotations

__version__ = "0.2.0"

import operator

import numpy as np

from ops_registry import REGISTRY, ShapeError

from .array import LazyArray, ScopeError, check_numeric, new_parameter, scalar_key
from .backends import get_backend, set_default_backend
from . import optim
from .cell import Cell, CellError, cell
from .checkpoint import load, save
from .grad.handles import no_grad
from .grad.leaf import Leaf
from .policy import FSMPolicy, PolicyError, learn_policy, load_policy
from .ops import COMPILED as compiled, FUNCTIONS as _FUNCTIONS  # compiled: lazyarray.recorders
from .scope import Scope, current, record
from .stats import Stats

globals().update(_FUNCTIONS)
from . import numpy_api  # noqa: E402,F401  (numpy's ufuncs and functions on LazyArrays)
from .dropout import dropout  # noqa: E402  (the public form of the registry's dropout: it draws its key)
from .keys import manual_seed  # noqa: E402


def batching(scheduler="agenda", backend=None, memplan=False, strict=None) -> Scope:
    """A recording scope: ``with la.batching() as scope: ...``.

    ``scheduler``: ``"agenda"`` (DyNet), ``"depth"`` (TensorFlow Fold), ``"sufficient"``
    (ED-Batch §5.3), ``"fsm"`` (learns a policy on the scope's own graph) or a scheduler object
    such as a policy from ``la.learn_policy``. ``backend``: ``"numpy"``, ``"cupy"`` or None for the default.
    ``memplan``: place values with ED-Batch's PQ-tree planner so batch operands are views
    instead of gathers (planned once per graph structure, then cached).
    Everything recorded runs when the scope exits or when a value is forced inside it
    (``float(x)``, ``x.asnumpy()``, ...); ``scope.stats`` then says what batching did.
    Scopes nest (the inner one records and runs on its own) and belong to their context
    (thread, asyncio task, greenlet). ``strict`` (default: ``LAZYARRAY_STRICT=1`` in the
    environment): forcing a value inside the scope is an error naming the line that did it,
    for hunting flushes that make a scope slow (``scope.map``'s flushes are allowed).
    """
    return Scope(scheduler=scheduler, backend=backend, memplan=memplan, strict=strict)


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


_split_equal, _getitem = _FUNCTIONS["split"], _FUNCTIONS["getitem"]


def split(x, indices_or_sections, axis=0):
    if indices_or_sections.__class__ is int or np.ndim(indices_or_sections) == 0:
        return _split_equal(x, indices_or_sections, axis)
    shape = x.shape if x.__class__ is LazyArray else np.shape(x)
    try:
        points = [operator.index(i) for i in indices_or_sections]
        ax = operator.index(axis)
    except TypeError:
        raise ShapeError(f"la.split: split points and axis must be integers, got {indices_or_sections!r}, "
                         f"axis {axis!r}") from None
    if not -len(shape) <= ax < len(shape):
        raise ShapeError(f"la.split: axis {axis} is out of bounds for an operand of shape {shape}")
    lead = (slice(None),) * (ax % len(shape))
    bounds = [0, *points, shape[ax]]
    return tuple(_getitem(x, lead + (slice(a, b),)) for a, b in zip(bounds, bounds[1:]))


split.__doc__ = REGISTRY["split"].doc + """

``la.split(x, indices_or_sections, axis=0)`` as ``numpy.split``: a number of equal parts (one
node with that many outputs, at most ``batching.PART_MASK``), or for a list of split points the
parts between them as basic slices (views, no kernel; any number, empty ones included).
Eager outside ``la.batching()``; recorded inside one."""


_einsum = _FUNCTIONS["einsum"]


def einsum(subscripts, *operands):
    return _einsum(list(operands), subscripts)


einsum.__doc__ = REGISTRY["einsum"].doc + """

``la.einsum(subscripts, *operands)`` as ``numpy.einsum`` (``la.einsum('bij,bj->bi', A, x)``; the
registry's form takes the operands as one list). Eager outside ``la.batching()``; recorded
inside one."""


_add = _FUNCTIONS["add"]


def child_sum(values) -> LazyArray:
    """The sum of a varying number of values of one shape (a child-sum TreeLSTM's children),
    recorded so that calls batch whatever their count: as a balanced tree of pairwise ``add``s,
    every one of which has the signature (add, class, class) of the values alone. A stack and a
    sum over axis 0 would key each call by its count (the stack's operand list, the (k, H)
    class), so nodes with 2, 3 or 5 children would never share a batch; here k values take
    ceil(log2 k) levels of adds, and every node's level j batches together. One value is
    returned as it is; none is a ShapeError (a leaf's sum is the caller's ``la.zeros(H)``)."""
    values = list(values)
    if not values:
        raise ShapeError("la.child_sum: no values to sum (for a leaf, pass la.zeros(shape) itself)")
    while len(values) > 1:
        values = [_add(values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0] if values[0].__class__ is LazyArray else array(values[0])


def _host_or_device(value):
    """Device arrays (cupy) stay where they are; anything else becomes a numpy array."""
    return value if hasattr(value, "__cuda_array_interface__") else np.asarray(value)


def map(fn, instances) -> list:
    """``[fn(x) for x in instances]``; inside a scope each call is a task of ``scope.map``: a
    task that forces a value waits, and the scope flushes once for all the waiting tasks."""
    scope = current()
    if scope is None:
        return [fn(x) for x in instances]
    return scope.map(fn, instances)


def asnumpy(x):
    """The value of ``x`` (a LazyArray or anything numpy accepts) as a numpy array."""
    return x.asnumpy() if isinstance(x, LazyArray) else np.asarray(x)


__all__ = ["Cell", "CellError", "FSMPolicy", "LazyArray", "PolicyError", "Scope", "ScopeError", "ShapeError", "Stats", "array", "asnumpy", "batching", "cell", "child_sum",
           "compiled", "current", "full", "full_like", "get_backend", "learn_policy", "load", "load_policy", "manual_seed", "map", "no_grad",
           "ones", "ones_like", "optim", "parameter", "record", "save", "zeros", "zeros_like",
           "set_default_backend",
           *sorted(_FUNCTIONS)]
