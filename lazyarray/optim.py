"""Optimizers: ``opt.step()`` applies the gradients ``loss.backward()`` accumulated and clears
them (DyNet's ``trainer.update()``); ``opt.zero_grad()`` only clears. PyTorch's formulas and
defaults (``SGD``, ``Adam``, ``Adagrad``), plus ``clip=``: clipping by global norm before the
update (``clip_grad_norm``), off by default (DyNet clips at 5 by default).

Parameters are updated in place, never rebound: cells, plan caches and learned policies hold
them by identity. A view of a parameter shares that parameter's gradient and is skipped, as are
parameters that do not ask for a gradient (integer ones, ``requires_grad=False``) and those no
backward reached since the last step.

Sparse rows: a table read by rows (``E[w]``) gets only the rows a step touched (repeated rows
summed first: a sort, and a reduction into the touched rows, never a vocabulary-sized array),
and every optimizer updates only those rows and only their state. For SGD without momentum and
for Adagrad that is exactly the dense update (a zero gradient row changes neither its
accumulator nor its value). For SGD with momentum and for Adam it is the lazy update of
PyTorch's ``SparseAdam`` and DyNet's sparse updates: a row's momentum / moments change only on
the steps that touch it, so an untouched row does not keep moving on its old momentum and its
moments do not decay; Adam's step count (its bias correction) is the table's, counted on every
step that gives the table a gradient. Weight decay on such a table applies to the touched rows
only. A table that also gets a dense gradient in a step (``E`` read whole somewhere) is updated
densely in that step, and so is one whose ``.grad`` was read before the step: reading it merges
its rows into one dense array.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ops_registry.gradients import Rows, sum_rows

from .array import LazyArray
from .grad.handles import _pending, _xp

__all__ = ["Adagrad", "Adam", "Optimizer", "SGD", "clip_grad_norm"]


class Optimizer:
    """Holds the parameters it updates and, per parameter, ``state``: ``step`` (the steps
    that updated it) and its slots (arrays of the parameter's shape, made at its first update).
    ``HYPER``: the constructor's hyperparameters, attributes that may be changed between steps
    (``opt.lr = ...``) and that ``la.save`` keeps with the state."""

    HYPER: tuple = ()

    def __init__(self, params, lr, weight_decay, clip):
        if not lr >= 0:
            raise ValueError(f"learning rate must be >= 0, not {lr}")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, not {weight_decay}")
        if clip is not None and not clip > 0:
            raise ValueError(f"clip must be None or > 0, not {clip}")
        self.params = parameters(params)
        if not self.params:
            raise ValueError("the optimizer got no parameters to update (an exhausted iterator?)")
        self.state = [{} for _ in self.params]
        self.lr, self.weight_decay, self.clip = lr, weight_decay, clip

    def slots(self) -> dict:
        """Name -> initial value of the per-element state this optimizer keeps."""
        return {}

    def rule(self, xp, g, slots: dict, step: int):
        """The amount to subtract from the parameter (or the touched rows) with gradient ``g``;
        updates ``slots`` (arrays of g's shape) in place."""
        raise NotImplementedError

    def zero_grad(self):
        """Clear the gradients of every parameter (a backward pending in the scope runs first,
        so that its gradient is cleared too, as its place in the program says)."""
        _pending()
        for p in self.params:
            p._scope.clear()

    def step(self):
        """Apply the accumulated gradients in place and clear them. Inside a scope, a pending
        backward runs first (with everything recorded so far)."""
        _pending()
        grads = _gradients(self.params)
        if self.clip is not None:
            _clip(grads, self.clip)
        for i, g, rows in grads:
            self._update(self.params[i]._value, self.state[i], g, rows)
        for p in self.params:
            p._scope.clear()

    def _update(self, value, state, g, rows):
        """One formula serves dense and sparse gradients: for rows, it runs on copies of the
        touched rows of the parameter and its slots, written back after."""
        xp = _xp(value)
        for k, v in self.slots().items():   # per slot: momentum may be switched on between steps
            if k not in state:
                state[k] = xp.full(value.shape, v, value.dtype)
        state["step"] = state.get("step", 0) + 1
        if self.weight_decay:
            g = g + self.weight_decay * (value if rows is None else value[rows])
        slots = {k: state[k] if rows is None else state[k][rows] for k in self.slots()}
        delta = self.rule(xp, g, slots, state["step"])
        if rows is None:
            value -= delta
            return
        value[rows] -= delta
        for k, a in slots.items():
            state[k][rows] = a


class SGD(Optimizer):
    """``p -= lr * g`` (PyTorch's SGD: momentum ``buf = momentum * buf + g``, then ``buf`` or,
    with ``nesterov``, ``g + momentum * buf`` is applied; weight decay adds ``wd * p`` to g).
    With momentum, tables read by rows are updated lazily (module docstring)."""

    HYPER = ("lr", "momentum", "weight_decay", "nesterov", "clip")

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False, clip=None):
        if not momentum >= 0:
            raise ValueError(f"momentum must be >= 0, not {momentum}")
        if nesterov and not momentum > 0:
            raise ValueError("nesterov momentum needs momentum > 0")
        super().__init__(params, lr, weight_decay, clip)
        self.momentum, self.nesterov = momentum, bool(nesterov)

    def slots(self):
        return {"momentum_buffer": 0.0} if self.momentum else {}

    def rule(self, xp, g, slots, step):
        if self.momentum:
            buf = slots["momentum_buffer"]
            buf *= self.momentum
            buf += g
            g = g + self.momentum * buf if self.nesterov else buf
        return self.lr * g


class Adam(Optimizer):
    """PyTorch's Adam (L2 weight decay added to the gradient, not AdamW's decoupled one).
    Tables read by rows are updated lazily, as ``torch.optim.SparseAdam`` (module docstring)."""

    HYPER = ("lr", "betas", "eps", "weight_decay", "clip")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, clip=None):
        betas = tuple(betas)
        if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1), not {betas}")
        if not eps >= 0:
            raise ValueError(f"eps must be >= 0, not {eps}")
        super().__init__(params, lr, weight_decay, clip)
        self.betas, self.eps = betas, eps

    def slots(self):
        return {"exp_avg": 0.0, "exp_avg_sq": 0.0}

    def rule(self, xp, g, slots, step):
        b1, b2 = self.betas
        m, v = slots["exp_avg"], slots["exp_avg_sq"]
        m *= b1
        m += (1 - b1) * g
        v *= b2
        v += (1 - b2) * (g * g)
        denom = xp.sqrt(v)
        denom /= math.sqrt(1 - b2 ** step)
        denom += self.eps
        delta = m / denom
        delta *= self.lr / (1 - b1 ** step)
        return delta


class Adagrad(Optimizer):
    """PyTorch's Adagrad (no learning-rate decay): ``sum += g²; p -= lr * g / (√sum + eps)``.
    DyNet's default trainer for tree models. On tables read by rows it updates only the touched
    rows, which is exactly the dense update."""

    HYPER = ("lr", "eps", "initial_accumulator_value", "weight_decay", "clip")

    def __init__(self, params, lr=1e-2, eps=1e-10, initial_accumulator_value=0.0, weight_decay=0.0, clip=None):
        if not eps >= 0:
            raise ValueError(f"eps must be >= 0, not {eps}")
        if not initial_accumulator_value >= 0:
            raise ValueError(f"initial_accumulator_value must be >= 0, not {initial_accumulator_value}")
        super().__init__(params, lr, weight_decay, clip)
        self.eps, self.initial_accumulator_value = eps, initial_accumulator_value

    def slots(self):
        return {"sum": self.initial_accumulator_value}

    def rule(self, xp, g, slots, step):
        acc = slots["sum"]
        acc += g * g
        std = xp.sqrt(acc)
        std += self.eps
        delta = g / std
        delta *= self.lr
        return delta


def clip_grad_norm(params, max_norm) -> float:
    """Scale the gradients of ``params`` so that their global 2-norm is at most ``max_norm``
    (PyTorch's ``clip_grad_norm_``: by ``max_norm / (norm + 1e-6)`` where that is below 1);
    returns the norm before clipping. Sparse row gradients stay sparse."""
    _pending()
    params = parameters(params)
    grads = _gradients(params)
    total, scaled = _clip(grads, max_norm)
    if scaled:
        for i, g, rows in grads:
            leaf = params[i]._scope
            if rows is None:
                leaf.set(g)
            else:
                leaf.clear()
                leaf.add(_xp(g), Rows(rows, g))
    return total


def parameters(params) -> list:
    """The distinct real parameters among ``params`` (an iterable of la.parameter handles, or a
    dict of them), in order; views are skipped (they share their base's gradient)."""
    if isinstance(params, Mapping):
        params = params.values()
    elif not hasattr(params, "__iter__"):
        raise TypeError(f"params: an iterable of la.parameter handles or a dict of them, not {type(params).__name__}")
    out, seen = [], set()
    for p in params:
        check_parameter(p)
        if p._scope.base is None and p._ref not in seen:
            seen.add(p._ref)
            out.append(p)
    return out


def check_parameter(p):
    if not isinstance(p, LazyArray) or p._ref >= 0:
        raise TypeError(f"expected an la.parameter handle, not {type(p).__name__}"
                        + (" (an array or future: parameters are made with la.parameter)" if isinstance(p, LazyArray) else ""))


def _gradients(params) -> list:
    """(index, gradient, rows) per parameter that has a gradient and asks for one: rows None
    for a dense gradient, else the distinct touched rows (sorted) and their summed gradients."""
    out = []
    for i, p in enumerate(params):
        leaf = p._scope
        if not leaf.requires_grad:
            continue
        dense, parts = leaf.parts()
        if dense is None and parts:
            out.append((i, *_coalesce(_xp(p._value), parts, leaf.shape[0])))
        elif dense is not None or parts:
            out.append((i, leaf.read(_xp(p._value)), None))
    return out


def _coalesce(xp, parts, n):
    """(summed gradients, distinct rows) of a table's row updates; negative rows (``E[-1]``)
    are the rows they name."""
    indices = xp.concatenate([r.indices for r in parts]) % n
    values = xp.concatenate([r.values for r in parts]) if len(parts) > 1 else parts[0].values
    rows, summed = sum_rows(xp, indices.reshape(-1), values.reshape((-1,) + values.shape[indices.ndim:]))
    return summed, rows


def _clip(grads, max_norm):
    """Scale ``grads`` (from ``_gradients``, replaced in the list) to a global norm of at most
    ``max_norm``; returns (norm before, whether it scaled). New arrays: a gradient may be an
    array the user assigned to ``p.grad``."""
    total = math.sqrt(sum(float(_xp(g).vdot(g, g)) for _, g, _ in grads))
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        grads[:] = [(i, g * coef, rows) for i, g, rows in grads]
    return total, coef < 1
