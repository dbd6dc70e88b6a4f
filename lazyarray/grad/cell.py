"""The backward of a batch of cell calls: the traced body's steps in reverse, each member's
gradient one call of its op's rule over all the batch's calls, its parameters' gradients one
reduction each. The body's forward values come from the forward run (``CellPlan.run_saving``,
when the backward was asked for before the flush) or are computed again here (when it was asked
for after: a value was forced first). Derived once per trace like the forward, no work per call."""
from __future__ import annotations

import batching

from ..array import CLASSES
from ..cell import _indices
from ..executor import _CONST
from ops_registry.kernels import take_rows
from .leaf import leaf_of

PART_BITS, PART_MASK = batching.PART_BITS, batching.PART_MASK


def batch(bwd, step, shift, ins, saved, program):
    """Backward of one forward ``_CELL`` step of the executor (``bwd``: the pass)."""
    _, plan, args, ints, claim, targets, join = step
    xp, ex = bwd.xp, bwd.ex
    n, start = len(claim[1]), claim[2]
    grads = _Grads(xp)
    for t, ref in zip(targets, plan.outputs):
        G = bwd.grads.get(t + shift)
        if G is not None:
            grads.values = None
            grads.pending.append((ref, G[start:start + n] if start >= 0 else G[claim[1]]))
    if not grads.pending:
        return
    index_args = [ins[p] for p in ints]
    # the arguments again, as the forward read them (gather buffers were reused since)
    arrays = [ex._get(r, shift, ins) for r in args]
    joined = None
    if join is not None:
        base_id, at, op, attrs, cls = join
        if at is None:
            joined = ex.bases[base_id + shift]
        else:
            source = ex.bases[base_id + shift]
            shape, dtype = CLASSES[cls]
            joined = xp.empty((n,) + shape, dtype)
            take_rows(xp, source, at, out=op.gather_view(joined, at.shape[1], **attrs))
    if saved is None:
        saved = plan.run_saving(xp, arrays, n, ex.stats, index_args, {}, None, joined)[1]
    else:
        for node, a in zip(plan.placeholders, arrays):
            if a is not None:
                saved[node << PART_BITS] = a
        if joined is not None:
            saved[plan.steps[plan.join[0]].members[0] << PART_BITS] = joined
    grads.values = saved
    for ref, g in grads.pending:
        grads.add(ref, g)
    skip = plan.join[0] if join is not None else None
    body(xp, plan, grads, n, index_args, skip)
    for node, recipe in zip(plan.placeholders, args):
        g = grads.get(node << PART_BITS)
        if g is not None and not (recipe[0] == _CONST and recipe[1] is None):
            bwd.give(recipe, g, shift, ins, program)
    if join is not None:
        g = grads.get(plan.steps[plan.join[0]].members[0] << PART_BITS)
        if g is not None:
            base_id, at, op, attrs, cls = join
            G = bwd.gbase(base_id + shift)
            if G is not None:
                if at is None:
                    G += g
                else:
                    g = op.gather_view(xp.ascontiguousarray(g), at.shape[1], **attrs)
                    bwd.scatter(G, at.reshape(-1), g.reshape((-1,) + G.shape[1:]), program, at)


class _Grads:
    """Gradients of body values by reference. A part of a multi-output node (a split's part,
    a merged gate) adds into its whole node's gradient, viewed: one array per node."""

    def __init__(self, xp):
        self.xp, self.grads, self.owned, self.values, self.pending = xp, {}, set(), None, []
        self.rename: dict = {}

    def get(self, ref):
        return self.grads.get(ref)

    def pop(self, ref):
        return self.grads.pop(ref, None)

    def add(self, ref, g):
        ref = self.rename.get(ref, ref)
        if ref.__class__ is list:       # the whole of a merged gates node: each product its part
            for j, r in enumerate(ref):
                self.add(r, g[:, j])
            return
        node, part = ref >> PART_BITS, ref & PART_MASK
        if part and node << PART_BITS in self.values:     # (a nested cell's outputs have no whole)
            whole = node << PART_BITS
            W = self.grads.get(whole)
            if W is None:
                W = self.xp.zeros_like(self.values[whole])
            elif id(W) not in self.owned:
                W = self.xp.array(W)
            self.grads[whole] = W
            self.owned.add(id(W))
            W[:, part - 1] += g
            return
        have = self.grads.get(ref)
        self.grads[ref] = g if have is None else have + g
        if have is not None:
            self.owned.add(id(self.grads[ref]))


def body(xp, plan, grads, calls, index_args, skip=None):
    """The body's steps in reverse (``skip``: a join the caller made, whose gradient it sends
    back itself); gradients of placeholders are left in ``grads``."""
    grads.rename = _renames(plan)
    for i in range(len(plan.steps) - 1, -1, -1):
        if i == skip:
            continue
        step = plan.steps[i]
        for original in (step.originals if step.mode == "arranged" else (step,)):
            _members(xp, original, grads, calls, index_args)


def _renames(plan):
    """Merged products' gates read as parts of synthetic nodes (``arrange``): their gradients
    belong to the products' own nodes."""
    if getattr(plan, "_renames", None) is None:
        out = {}
        for step in plan.steps:
            if step.mode == "arranged" and step.synthetic is not None:
                for p, synthetic in enumerate(step.synthetic):
                    nodes = [nodes[p] << PART_BITS for nodes in step.nodes]
                    out[synthetic << PART_BITS] = nodes
                    for j, r in enumerate(nodes):
                        out[(synthetic << PART_BITS) + j + 1] = r
        plan._renames = out
    return plan._renames


def _members(xp, step, grads, calls, index_args):
    payload = step.payload
    values = grads.values
    for m, node in enumerate(step.members):
        refs, aux = step.refs[m], step.aux[m]
        if payload.kind == "cell":
            if payload.part_cls:
                outs = [grads.pop((node << PART_BITS) + p + 1) for p in range(len(payload.part_cls))]
            else:
                outs = [grads.pop(node << PART_BITS)]
            if any(o is not None for o in outs):
                _nested(xp, payload, refs, aux, outs, grads, calls, index_args)
            continue
        g = grads.pop(node << PART_BITS)
        if g is None:
            continue
        op = payload.op
        operands, stacked, needs, targets, slot = [], [], [], [], 0
        for spec in payload.layout:
            kind = spec[0]
            if kind == "index":
                size = 1
                for d in spec[1]:
                    size *= d
                operands.append(_indices([aux], slot, size, spec[1], calls, index_args))
                needs.append(False)
                targets.append(None)
                slot += size
            elif kind == "list":
                items = [_operand(s, refs, values) for s in spec[1]]
                operands.append([v for v, _, _, _ in items])
                stacked.append(tuple(f for _, f, _, _ in items))
                needs.append(tuple(nd for _, _, nd, _ in items))
                targets.append([t for _, _, _, t in items])
            else:
                v, f, nd, t = _operand(spec, refs, values)
                operands.append(v)
                stacked.append(f)
                needs.append(nd)
                targets.append(t)
        if not any(any(nd) if isinstance(nd, tuple) else nd for nd in needs):
            continue
        if len(stacked) == 1 and isinstance(stacked[0], tuple):
            stacked = stacked[0]
        if op.vjp is None:
            raise NotImplementedError(f"la.{op.name} has no gradient rule: a backward cannot pass through it")
        got = op.vjp(xp, tuple(stacked), tuple(needs), g, values[node << PART_BITS], *operands, **payload.attrs)
        for target, grad in zip(targets, got):
            if isinstance(target, list):
                for t, gi in zip(target, grad or ()):
                    _give(xp, grads, t, gi)
            else:
                _give(xp, grads, target, grad)


def _operand(spec, refs, values):
    """(value, stacked?, needs a gradient?, where its gradient goes) of one body operand."""
    kind = spec[0]
    if kind == "stacked":
        v = values[refs[spec[1]]]
        return v, True, v.dtype.kind == "f", refs[spec[1]]
    if kind == "shared":
        leaf = leaf_of(-spec[2])
        wants = leaf is not None and leaf.requires_grad
        return spec[1], False, wants, (leaf if wants else None)
    return spec[1], False, False, None


def _give(xp, grads, target, grad):
    if target is None or grad is None:
        return
    if target.__class__ is int:
        grads.add(target, grad)
    else:
        target.add(xp, grad)


def _nested(xp, payload, refs, aux, outs, grads, calls, index_args):
    """A cell called in the body: its body's values computed again for these calls, then its
    backward; its arguments' gradients go to this body's values."""
    plan = payload.plan
    arrays = [grads.values[refs[s[1]]] for s in payload.layout if s[0] == "stacked"]
    ints = [_indices([aux], j, 1, (), calls, index_args) for j in range(len(aux))]
    inner = _Grads(xp)
    inner.values = plan.run_saving(xp, arrays, calls, _NoStats(), ints, {})[1]
    for ref, g in zip(plan.outputs, outs):
        if g is not None:
            inner.add(ref, g)
    body(xp, plan, inner, calls, ints)
    stacked = [refs[s[1]] for s in payload.layout if s[0] == "stacked"]
    for node, ref in zip(plan.placeholders, stacked):
        got = inner.get(node << PART_BITS)
        if got is not None:
            grads.add(ref, got)


class _NoStats:
    """Kernels run again for a backward are not the forward's: not counted."""

    kernels = copied_bytes = 0
