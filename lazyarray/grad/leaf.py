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
ENABLED.set(True)   # in the importing context, for CPython's cache: as lazyarray.state's SCOPE
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

    def add(self, xp, grad, owned=False):
        """Accumulate a gradient: an array of the leaf's shape, or ``Rows``; ``owned``: an array
        nothing else holds, kept without a copy."""
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
                # a copy unless owned: grad may be a view
                self.dense = grad if owned and grad.dtype == self.dtype else xp.array(grad, dtype=self.dtype)
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
    finished: a backward that fails in the middle leaves every gradient as it was.

    A shared weight's gradient from a batch of products ``W @ x_i`` is ``G.T @ X`` (its bias's,
    ``G`` summed over rows): ``product`` keeps the batches' ``G`` and ``X`` and does one GEMM
    over all their rows (up to ``PRODUCT_ROWS`` at a time), as a hand-written backward does:
    a batch's own product of a few rows writes the whole weight-sized result, and a recurrence
    runs dozens of such batches (BiLSTM: two per time step)."""

    def __init__(self, xp):
        self.xp, self.items, self.products = xp, {}, {}

    def add(self, leaf, grad, owned=False):
        """``owned``: ``grad`` is a fresh array nothing else holds, kept without a copy."""
        entry = self.items.get(id(leaf))
        if entry is None:
            entry = self.items[id(leaf)] = [leaf, None, []]
        if isinstance(grad, Rows):
            entry[2].append(grad)
        elif entry[1] is None:
            # a copy unless owned: grad may be a view
            entry[1] = grad.astype(leaf.dtype, copy=False) if owned else self.xp.array(grad, dtype=leaf.dtype)
        else:
            entry[1] += grad

    def product(self, weight, bias, g, x):
        """Add ``g.T @ x`` to parameter ``weight``'s gradient and ``g`` summed over rows to
        ``bias``'s (parameter ids, 0: none), later. ``g`` (rows, out) and ``x`` (rows, in) must
        not change until ``commit``."""
        weight, bias = _wanted(weight), _wanted(bias)
        if weight is None and bias is None:
            return
        key = (id(weight), id(bias))
        entry = self.products.get(key)
        if entry is None:
            entry = self.products[key] = [weight, bias, [], [], 0]
        entry[2].append(g)
        entry[3].append(x)
        entry[4] += len(g)
        if entry[4] >= PRODUCT_ROWS:
            del self.products[key]
            self._reduce(entry)

    def _reduce(self, entry):
        weight, bias, gs, xs, _ = entry
        xp = self.xp
        G = gs[0] if len(gs) == 1 else xp.concatenate(gs)
        if weight is not None:
            self.add(weight, G.T @ (xs[0] if len(xs) == 1 else xp.concatenate(xs)), owned=True)
        if bias is not None:
            self.add(bias, G.sum(axis=0), owned=True)

    def commit(self, drop=()):
        """Add the gradients to their leaves, except those of ``drop`` (leaves the losses do
        not reach: a batch they share with ones that do gave them zeros)."""
        for entry in self.products.values():
            self._reduce(entry)
        self.products = {}
        for leaf in drop:
            self.items.pop(id(leaf), None)
        for leaf, dense, rows in self.items.values():
            if dense is not None:
                leaf.add(self.xp, dense, owned=True)
            for r in rows:
                leaf.add(self.xp, r)
        self.items = {}


#: rows of products a shared weight's gradient waits for before one GEMM (``Staging.product``):
#: past ~1,000 rows a GEMM runs at full speed, and what waits is memory held
PRODUCT_ROWS = 2048


def register(pid: int, leaf: Leaf):
    """Name ``leaf`` by its parameter id until the leaf is gone."""
    LEAVES[pid] = weakref.ref(leaf, lambda _, pid=pid, leaves=LEAVES: leaves.pop(pid, None))


def leaf_of(pid: int):
    ref = LEAVES.get(pid)
    return None if ref is None else ref()


def _wanted(pid):
    """The leaf of parameter ``pid`` (0: none) if it asks for its gradient, else None."""
    leaf = leaf_of(pid) if pid else None
    return leaf if leaf is not None and leaf.requires_grad else None
