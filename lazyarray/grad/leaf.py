"""Gradient state of a parameter, or of an input that asked for its gradient: the gradient
accumulated so far, dense, plus sparse row updates of tables (``E[w]``) kept apart until read,
so that an optimizer can update only the rows a step touched."""
from __future__ import annotations

import contextvars
import threading
import weakref

import numpy as np

from ops_registry.gradients import Rows, add_rows

#: Whether eager mode records what it computes for a later ``backward()`` (``la.no_grad``).
ENABLED: contextvars.ContextVar = contextvars.ContextVar("lazyarray_grad", default=True)
_lock = threading.Lock()  # scopes of several threads may add to one parameter's gradient
#: parameter id -> weak reference to its Leaf: a batch names parameters by id
LEAVES: dict = {}


class Leaf:
    """``dense``: the gradient so far (None: zero); ``rows``: sparse row updates not yet
    merged (``Rows``); ``base``, ``view``: for a view of another parameter (``W.T`` in a
    scope), that parameter's leaf and how to view its gradient the same way."""

    __slots__ = ("requires_grad", "dense", "rows", "shape", "dtype", "base", "view", "__weakref__")

    def __init__(self, value, requires_grad: bool, base=None, view=None):
        self.shape, self.dtype = value.shape, value.dtype
        self.requires_grad = bool(requires_grad) and np.dtype(value.dtype).kind == "f"
        self.dense, self.rows, self.base, self.view = None, [], base, view

    def add(self, xp, grad):
        """Accumulate a gradient: an array of the leaf's shape, or ``Rows``."""
        if self.base is not None:
            if isinstance(grad, Rows):
                grad = grad.dense(xp, self.shape, self.dtype)
            with _lock:
                base = self.base
                if base.dense is None:
                    base.dense = xp.zeros(base.shape, base.dtype)
                self.view(base.dense)[...] += grad
            return
        with _lock:
            if isinstance(grad, Rows):
                self.rows.append(grad)
            elif self.dense is None:
                self.dense = xp.array(grad, dtype=self.dtype)      # a copy: grad may be a view
            else:
                self.dense += grad

    def read(self, xp=np):
        """The gradient as one dense array (sparse rows merged into it), or None."""
        with _lock:
            if self.rows:
                if self.dense is None:
                    self.dense = xp.zeros(self.shape, self.dtype)
                for r in self.rows:
                    _add_rows(xp, self.dense, r)
                self.rows = []
            return self.dense

    def parts(self):
        """(dense or None, list of Rows): for optimizers that update rows lazily."""
        with _lock:
            return self.dense, list(self.rows)

    def set(self, grad):
        with _lock:
            self.dense, self.rows = grad, []

    def clear(self):
        self.set(None)


def _add_rows(xp, dense, rows):
    add_rows(xp, dense, rows.indices, rows.values)


class Staging:
    """The gradients one backward computes for leaves, added to them only once it has
    finished: a backward that fails in the middle leaves every gradient as it was."""

    def __init__(self, xp):
        self.xp, self.items = xp, {}

    def add(self, leaf, grad):
        entry = self.items.get(id(leaf))
        if entry is None:
            entry = self.items[id(leaf)] = [leaf, None, []]
        if isinstance(grad, Rows):
            entry[2].append(grad)
        elif entry[1] is None:
            entry[1] = self.xp.array(grad, dtype=leaf.dtype)    # a copy: grad may be a view
        else:
            entry[1] += grad

    def commit(self):
        for leaf, dense, rows in self.items.values():
            if dense is not None:
                leaf.add(self.xp, dense)
            for r in rows:
                leaf.add(self.xp, r)
        self.items = {}


def register(pid: int, leaf: Leaf):
    """Name ``leaf`` by its parameter id until the leaf is gone."""
    LEAVES[pid] = weakref.ref(leaf, lambda _, pid=pid, leaves=LEAVES: leaves.pop(pid, None))


def leaf_of(pid: int):
    ref = LEAVES.get(pid)
    return None if ref is None else ref()
