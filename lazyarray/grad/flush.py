"""The batched backward of a scope (Cavs §3.2): the flushes that ran, in reverse, each one's
batches in reverse, each batch's gradient one call of its op's rule over the whole batch, a
parameter's gradient one reduction per batch, or for a shared weight of products
(``dW = G.T @ X``) one GEMM over all its batches' rows at the end (``Staging.product``). No
work per node.

Gradients live in arrays that mirror the forward's bases (``Executor.recipes``): an arena's
gradient is a zero array of its shape, made when a gradient first reaches it; a view's (a
split's parts, a reshape, a join read in place) is the same view of its parent's gradient, so
those pass gradients with no step at all, as they passed values. A batch whose results got no
gradient is skipped. Operands are read again as the forward read them (the program's recipes),
and gradients go back along the same recipes: added into a slice, scattered into gathered
rows (``add_rows``: rows may repeat), summed into a parameter's ``Leaf``.
"""
from __future__ import annotations

import numpy as np

import batching
from ops_registry.gradients import add_rows
from ops_registry.kernels import take_rows

from ..array import CLASSES
from ..executor import _CELL, _CONST, _DYNAMIC, _GATHER, _INDEX, _LIST, _MIXED, _OP, _SLICE, _TAKE
from . import cell as cell_backward
from .leaf import Staging, leaf_of

PART_BITS, PART_MASK = batching.PART_BITS, batching.PART_MASK


class Backward:
    """One backward pass over an executor's runs; ``grads`` maps a base id to its gradient."""

    def __init__(self, executor):
        self.ex, self.xp = executor, executor.xp
        self.grads: dict = {}
        self.staging = Staging(self.xp)   # parameters' gradients, added to them at the end

    def scatter(self, G, rows, g, program, key=None):
        """``G[rows] += g``: one fancy-indexed add where the rows are distinct (the usual case:
        each child read once per slot), ``add_rows`` (numpy's slow ``add.at``) where they
        repeat; which one is decided once per rows array of a cached program."""
        key = id(rows if key is None else key)
        distinct = program.distinct.get(key) if program is not None else None
        if distinct is None:
            distinct = _distinct(rows)
            if program is not None:
                program.distinct[key] = distinct
        if distinct:    # the rows taken, added to and put back: ~25% faster than G[rows] += g
            t = take_rows(self.xp, G, rows)
            t += g
            G[rows] = t
        else:
            add_rows(self.xp, G, rows, g)

    # -- where gradients live ------------------------------------------------------------------
    def gbase(self, bid):
        """The gradient of base ``bid``, made (zeros, or a view of its parent's) on first use;
        None for integer and bool values, which carry none."""
        g = self.grads.get(bid)
        if g is None:
            recipe = self.ex.recipes[bid]
            if recipe[0] == "arena":
                if np.dtype(recipe[2]).kind not in "fc":
                    return None
                g = self.xp.zeros(recipe[1], recipe[2])
            else:
                parent = self.gbase(recipe[1])
                if parent is None:
                    return None
                g = recipe[2](self.xp, parent)
            self.grads[bid] = g
        return g

    def locate(self, ref):
        """(base id, row) of a node reference's value."""
        ex = self.ex
        node, part = ref >> PART_BITS, ref & PART_MASK
        bid = int(ex.base_of[node])
        return (ex._part_base(bid, part) if part else bid), int(ex.row_of[node])

    def grad_of(self, ref):
        """The gradient a value got, or None where none reached it."""
        bid, row = self.locate(ref)
        if bid not in self.grads and not self._reached(bid):
            return None
        g = self.gbase(bid)
        return None if g is None else g[row]

    def _reached(self, bid):
        recipe = self.ex.recipes[bid]
        return recipe[0] == "view" and (recipe[1] in self.grads or self._reached(recipe[1]))

    # -- the pass ------------------------------------------------------------------------------
    def run(self, seeds, inputs, unreached=()):
        """``seeds``: references of scalar losses (each gets gradient 1); ``inputs``: (reference,
        Leaf) of inputs that asked for their gradient; ``unreached``: leaves of parameters the
        losses do not depend on (a batch they share with ones that do gives them zeros)."""
        ex = self.ex
        for ref in seeds:
            bid, row = self.locate(ref)
            self.gbase(bid)[row] += 1
        for r in range(len(ex.runs) - 1, -1, -1):
            program, view, shift = ex.runs[r]
            ins, steps = view.ins, program.steps
            for i in range(len(steps) - 1, -1, -1):
                step = steps[i]
                kind = step[0]
                if kind == _OP:
                    self.op(step, shift, ins, program)
                elif kind == _GATHER:
                    self.gather(step, shift, program)
                elif kind == _CELL:
                    cell_backward.batch(self, step, shift, ins, ex.saved.pop((r, i), None), program)
        for ref, leaf in inputs:
            g = self.grad_of(ref)
            if g is not None:
                self.staging.add(leaf, g)
        self.staging.commit(unreached)

    def rows(self, claim, shift):
        """(gradient, value) rows of a batch's results; None where no gradient reached them."""
        bid = claim[0] + shift
        G = self.grads.get(bid)
        if G is None:
            return None
        rows, start = claim[1], claim[2]
        A = self.ex.bases[bid]
        if start >= 0:
            n = len(rows)
            return G[start:start + n], A[start:start + n]
        return G[rows], A[rows]

    def op(self, step, shift, ins, program):
        _, op, stacked, operands, attrs, claim, cls, _ = step
        got = self.rows(claim, shift)
        if got is None:
            return
        needs = tuple(self.needs(r, shift) for r in operands)
        if not any(map(_any, needs)):
            return
        g, ans = got
        product = _product(step) if step[7] else None
        if product is not None:     # the weight's (and bias's) gradient: one GEMM at the end
            needs = (False, needs[1], *((False,) if product[1] else needs[2:]))
        # an operand a deferred product keeps is gathered into memory of its own
        values = [self.ex._get(r, shift, ins, product is not None and i == 1) for i, r in enumerate(operands)]
        grads = op.vjp(self.xp, stacked, needs, g, ans, *values, **attrs)
        if product is not None:
            self.staging.product(*product, g, values[1])
        for recipe, grad in zip(operands, grads):
            self.give(recipe, grad, shift, ins, program)

    def gather(self, step, shift, program):
        _, op, k, attrs, base_id, rows, claim, cls = step
        got = self.rows(claim, shift)
        source = self.gbase(base_id + shift) if got is not None else None
        if source is not None:
            g = op.gather_view(got[0], k, **attrs)
            self.scatter(source, rows.reshape(-1), g.reshape((-1,) + source.shape[1:]), program, rows)

    # -- operands ------------------------------------------------------------------------------
    def needs(self, recipe, shift):
        """Whether an operand wants a gradient: float (or complex) values, parameters that ask
        for one."""
        kind = recipe[0]
        if kind == _CONST:
            leaf = leaf_of(-recipe[2]) if recipe[2] else None
            return leaf is not None and leaf.requires_grad
        if kind == _INDEX:
            return False
        if kind == _LIST:
            return tuple(self.needs(r, shift) for r in recipe[1])
        if kind == _SLICE:
            return self.ex.bases[recipe[1] + shift].dtype.kind in "fc"
        cls = recipe[3] if kind == _TAKE else recipe[2]
        return CLASSES[cls][1].kind in "fc"

    def give(self, recipe, grad, shift, ins, program):
        """Add an operand's gradient where the forward read the operand (``program``: the
        flush's, None for recipes made while running, which are new every time)."""
        if grad is None:
            return
        kind = recipe[0]
        if kind == _SLICE:
            G = self.gbase(recipe[1] + shift)
            if G is not None:
                G[recipe[2]:recipe[3]] += grad
        elif kind == _TAKE:
            G = self.gbase(recipe[1] + shift)
            if G is not None:
                self.scatter(G, recipe[2], grad, program)
        elif kind == _MIXED:
            for base_id, at, rows in recipe[1]:
                G = self.gbase(base_id + shift)
                if G is not None:
                    self.scatter(G, rows, grad[at], program)
        elif kind == _DYNAMIC:
            self.give(self.ex._fetch_recipe(ins[recipe[1]], recipe[2], recipe[3]), grad, 0, ins, None)
        elif kind == _CONST:
            leaf = leaf_of(-recipe[2]) if recipe[2] else None
            if leaf is not None and leaf.requires_grad:
                self.staging.add(leaf, grad)
        elif kind == _LIST:
            for r, g in zip(recipe[1], grad):
                self.give(r, g, shift, ins, program)


def _product(step):
    """(weight, bias) parameter ids of a batch ``W @ x_i`` (+ ``b``) with a shared weight,
    whose gradients ``Staging.product`` makes at the end (bias 0: by its own rule), else None."""
    _, op, _, operands, _, _, cls, _ = step
    if operands[0][0] != _CONST or not operands[0][2]:
        return None
    bias = operands[2] if op.name == "affine" else None
    shared = bias is not None and bias[0] == _CONST and np.shape(bias[1]) == CLASSES[cls][0]
    return -operands[0][2], (-bias[2] if shared else 0)


def rule_missing(payload):
    """The first operator without a gradient rule that a batch of ``payload`` runs (a cell's
    body, nested cells too), or None."""
    if payload.kind == "op":
        return None if payload.op.vjp is not None else payload.op
    if payload.kind == "cell":
        for step in payload.plan.steps:
            for s in getattr(step, "originals", (step,)):
                missing = rule_missing(s.payload)
                if missing is not None:
                    return missing
    return None


def _distinct(rows) -> bool:
    """Whether no row repeats: sorted and compared (~1.5 us for 64 rows; ``np.unique``'s
    wrappers ~3.9), once per rows array of a flush that misses the plan cache."""
    if len(rows) < 2:
        return True
    s = np.sort(rows, axis=None)
    return bool((s[1:] != s[:-1]).all())


def _any(need) -> bool:
    return any(need) if isinstance(need, tuple) else bool(need)
