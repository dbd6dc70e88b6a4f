"""lazyarray: write a dynamic network per instance over numpy-like arrays; inside
``with la.batching():`` calls are recorded, grouped into batches of equal signature and run as
batched kernels. Outside a scope every call runs eagerly with the same results."""
from __future__ import annotations

__version__ = "0.2.0"

import numpy as np

from ops_registry import ShapeError

from .array import LazyArray, ScopeError, check_numeric, new_parameter
from .backends import get_backend, set_default_backend
from . import optim
from .cell import Cell, CellError, cell
from .checkpoint import load, save
from .grad.handles import no_grad
from .grad.leaf import Leaf
from .policy import FSMPolicy, PolicyError, learn_policy, load_policy
from .ops import FUNCTIONS as _FUNCTIONS
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


def parameter(value, name=None, requires_grad=True) -> LazyArray:
    """A shared operand (weights, embedding tables): keyed by identity in signatures, so many
    ``W @ x_i`` batch into one ``W @ X``. ``name`` labels it in ``explain()``, policies and
    saved files. A float parameter gets a gradient from ``loss.backward()`` (``p.grad``)
    unless ``requires_grad=False``; it is updated in place (``la.optim``), never rebound."""
    return new_parameter(_host_or_device(value), name, requires_grad)


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


__all__ = ["Cell", "CellError", "FSMPolicy", "LazyArray", "PolicyError", "Scope", "ScopeError", "ShapeError", "Stats", "array", "asnumpy", "batching", "cell",
           "current", "get_backend", "learn_policy", "load", "load_policy", "manual_seed", "map", "no_grad", "optim", "parameter",
           "record", "save",
           "set_default_backend",
           *sorted(_FUNCTIONS)]
