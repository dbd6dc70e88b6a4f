"""What a ``LazyArray`` offers for gradients: ``backward()``, ``.grad``, ``.requires_grad``,
and ``la.no_grad()``. Attached to the class here, as ``lazyarray.ops`` attaches the operators."""
from __future__ import annotations

import contextlib

import numpy as np

from ..array import LazyArray
from ..fusion import Detached
from ..scope import Scope
from ..state import SCOPE
from . import tape
from .leaf import ENABLED, Leaf


def backward(self):
    """Accumulate the gradient of this scalar into ``p.grad`` of every parameter it depends on
    (and of every input made with ``la.array(x, grad=True)``). Inside a scope it is recorded
    and runs batched at the next flush (the scope's exit, or a forced value); eagerly it runs
    at once. Gradients add up across calls until cleared (``opt.zero_grad()``, ``p.grad = None``)."""
    if self.shape != ():
        raise ValueError(f"backward() needs a scalar (a loss), not a LazyArray of shape {self.shape}: "
                         "reduce it first, e.g. la.sum(x).backward()")
    if self.dtype.kind != "f":
        raise TypeError(f"backward() needs a float scalar; this one is {self.dtype}")
    s = self._scope
    if s.__class__ is Detached:
        s.revive(self)
        s = self._scope
    if s.__class__ is Scope:
        s.backward(self)
        return
    if s is tape.FINISHED:
        raise s.refusal()
    if s is None or not tape.carries(self):
        raise RuntimeError("this value depends on no parameter or input that asks for a gradient "
                           "(computed under la.no_grad(), or from plain arrays only)")
    tape.backward(self, _xp(self._value))


def _xp(value):
    """The array module of a value; numpy for a future not computed yet (the backend's module
    is only known when it runs)."""
    if value is None or value.__class__ is np.ndarray or isinstance(value, np.generic):
        return np
    import cupy  # pragma: no cover - GPU machines only
    return cupy


def _leaf(a):
    s = a._scope
    if s.__class__ is Leaf:
        return s
    if s.__class__ is Scope:
        return s.leaves.get(a._ref) if s.graph is not None else None
    return None


def _pending():
    """A backward recorded in this context's scope but not run yet runs now, so that reading
    a gradient sees it."""
    scope = SCOPE.get()
    if scope is not None and scope.seeds:
        scope.flush()


def _get_grad(self):
    """The accumulated gradient (an array of this parameter's shape and dtype), None if no
    backward reached it. Sparse row updates of a table are merged in when it is read."""
    leaf = _leaf(self)
    if leaf is None:
        return None
    _pending()
    if leaf.base is not None:
        base = leaf.base.read(_xp(self._value))
        return None if base is None else leaf.view(base)
    return leaf.read(_xp(self._value))


def _set_grad(self, value):
    leaf = _leaf(self)
    if leaf is None:
        raise AttributeError("only parameters and inputs made with la.array(x, grad=True) hold a gradient")
    _pending()      # a backward called before this assignment comes before it
    if leaf.base is not None:
        raise AttributeError("a view of a parameter (W.T, W[0:2]) shares that parameter's gradient: set its")
    if value is not None:
        value = np.asarray(value) if _xp(self._value) is np else value
        if value.shape != leaf.shape:
            raise ValueError(f"a gradient of shape {value.shape} for a value of shape {leaf.shape}")
    leaf.set(value)


def _get_requires_grad(self) -> bool:
    leaf = _leaf(self)
    if leaf is not None:
        return leaf.requires_grad
    return self._scope is not None and tape.carries(self)


def _set_requires_grad(self, flag):
    leaf = _leaf(self)
    if leaf is None:
        raise AttributeError("requires_grad can be set on parameters (and inputs made with la.array(x, grad=True))")
    if flag and np.dtype(leaf.dtype).kind != "f":
        raise TypeError(f"only float parameters can ask for a gradient, not {np.dtype(leaf.dtype)}")
    (leaf.base or leaf).requires_grad = bool(flag)


LazyArray.backward = backward
LazyArray.grad = property(_get_grad, _set_grad)
LazyArray.requires_grad = property(_get_requires_grad, _set_requires_grad)


@contextlib.contextmanager
def no_grad():
    """Eager calls inside record nothing for a backward (as ``torch.no_grad``): for inference
    with parameters that ask for gradients. Scopes record their graph either way; a backward
    is only run where ``backward()`` is called."""
    token = ENABLED.set(False)
    try:
        yield
    finally:
        ENABLED.reset(token)
