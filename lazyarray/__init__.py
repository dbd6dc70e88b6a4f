"""lazyarray: write a dynamic network per instance over numpy-like arrays; inside
``with la.batching():`` calls are recorded, grouped into batches of equal signature and run as
batched kernels. Outside a scope every call runs eagerly with the same results."""
from __future__ import annotations

__version__ = "0.2.0"

import numpy as np

from ops_registry import ShapeError

from .array import LazyArray, ScopeError
from .backends import get_backend, set_default_backend
from . import optim
from .cell import Cell, CellError, cell
from .checkpoint import load, save
from .grad.handles import no_grad
from .policy import FSMPolicy, PolicyError, learn_policy, load_policy
from .ops import COMPILED as compiled, FUNCTIONS as _FUNCTIONS  # compiled: lazyarray.recorders
from .scope import Scope, current, record
from .stats import Stats

globals().update(_FUNCTIONS)
from .creation import array, full, full_like, ones, ones_like, parameter, zeros, zeros_like  # noqa: E402
from .wrappers import child_sum, einsum, split  # noqa: E402,F401  (numpy's forms over the registry's split, einsum)
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
