"""The backward of a batch of cell calls: the traced body's steps in reverse, each member's
gradient one call of its op's rule over all the batch's calls, its parameters' gradients one
reduction each. The body's forward values come from the forward run (``CellPlan.run_saving``,
when the backward was asked for before the flush) or are computed again here (when it was asked
for after: a value was forced first). Derived once per trace like the forward, no work per call."""
from __future__ import annotations

import batching
import numpy as np

from .. import arrange
from ..array import CLASSES
from ..cell import IndexArg, _index_key, _indices
from ..executor import _CONST
from .leaf import leaf_of

PART_BITS, PART_MASK = batching.PART_BITS, batching.PART_MASK


def batch(bwd, step, shift, ins, saved, program):
    """Backward of one forward ``_CELL`` step of the executor (``bwd``: the pass)."""
    _, plan, args, ints, claim, targets, join = step
    xp, ex = bwd.xp, bwd.ex
    n, start = len(claim[1]), claim[2]
    grads = _Grads(xp, bwd.staging)
    for t, ref in zip(targets, plan.outputs):
        G = bwd.grads.get(t + shift)
        if G is not None:
            grads.values = None
            grads.pending.append((ref, G[start:start + n] if start >= 0 else G[claim[1]]))
    if not grads.pending:
        return
    index_args = [ins[p] for p in ints]
    if saved is None:       # the body's values again, from its arguments gathered again
        arrays = [ex._get(r, shift, ins, fresh=True) for r in args]
        joined = None
        if join is not None:
            if join[1] is None:
                joined = ex.bases[join[0] + shift]
            else:
                shape, dtype = CLASSES[join[4]]
                joined = ex.gather_join(join, shift, xp.empty((n,) + shape, dtype))
        saved = plan.run_saving(xp, arrays, n, ex.stats, index_args, {}, None, joined)[1]
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
            _give_join(bwd, join, g, shift, program)


def _give_join(bwd, join, g, shift, program):
    """A cell batch's join of arguments (``Executor._compile_join``) sends its gradient ``g``
    back where it gathered them from."""
    base_id, at, op, attrs, _ = join
    if at is None:
        G = bwd.gbase(base_id + shift)
        if G is not None:
            G += g
        return
    g = op.gather_view(bwd.xp.ascontiguousarray(g), at.shape[1] if base_id is not None else len(at), **attrs)
    if base_id is not None:
        G = bwd.gbase(base_id + shift)
        if G is not None:
            bwd.scatter(G, at.reshape(-1), g.reshape((-1,) + G.shape[1:]), program, at)
        return
    for j, (b, rows) in enumerate(at):
        G = bwd.gbase(b + shift)
        if G is None:
            continue
        if rows.__class__ is slice:
            G[rows] += g[:, j]
        else:
            bwd.scatter(G, rows, g[:, j], program)


class _Grads:
    """Gradients of body values by reference. A part of a multi-output node (a split's part,
    a merged gate) adds into its whole node's gradient, viewed: one array per node."""

    def __init__(self, xp, staging):
        self.xp, self.grads, self.owned, self.values, self.pending = xp, {}, set(), None, []
        self.staging = staging      # where parameters' gradients go (added to them at the end)
        self.rename: dict = {}

    def get(self, ref):
        return self.grads.get(ref)

    def pop(self, ref):
        self.owned.discard(id(self.grads.get(ref)))
        return self.grads.pop(ref, None)

    def whole(self, ref):
        """The gradient of multi-output node ``ref``, owned here so that its parts add into it
        in place: zeros at first (``zeros``, not ``zeros_like``'s Python wrapper: 0.3 against
        1.2 µs, once a batch), a copy of one it was given."""
        W = self.grads.get(ref)
        if W is None:
            value = self.values[ref]
            W = self.xp.zeros(value.shape, value.dtype)
        else:
            W = self.xp.array(W)
        self.grads[ref] = W
        self.owned.add(id(W))
        return W

    def add(self, ref, g):
        ref = self.rename.get(ref, ref)
        if ref.__class__ is list:       # the whole of a merged gates node: each product its part
            for j, r in enumerate(ref):
                self.add(r, g[:, j])
            return
        node, part = ref >> PART_BITS, ref & PART_MASK
        if part and node << PART_BITS in self.values:     # (a nested cell's outputs have no whole)
            W = self.grads.get(node << PART_BITS)
            if W is None or id(W) not in self.owned:
                W = self.whole(node << PART_BITS)
            W[:, part - 1] += g
            return
        have = self.grads.get(ref)
        self.grads[ref] = g if have is None else have + g
        if have is not None:
            self.owned.add(id(self.grads[ref]))


def body(xp, plan, grads, calls, index_args, skip=None):
    """The body's steps in reverse (``skip``: a join the caller made, whose gradient it sends
    back itself); gradients of placeholders are left in ``grads``."""
    if plan._backward is None:     # (the function, ``_renames``): both once per trace
        plan._backward = _compile(plan), _renames(plan)
    run, grads.rename = plan._backward
    run(xp, grads, grads.values, grads.grads, grads.staging, calls, index_args, skip is not None)


def _renames(plan):
    """Merged products' gates read as parts of synthetic nodes (``arrange``): their gradients
    belong to the products' own nodes."""
    out = {}
    for step in plan.steps:
        if step.mode == "arranged" and step.synthetic is not None:
            for p, synthetic in enumerate(step.synthetic):
                nodes = [nodes[p] << PART_BITS for nodes in step.nodes]
                out[synthetic << PART_BITS] = nodes
                for j, r in enumerate(nodes):
                    out[(synthetic << PART_BITS) + j + 1] = r
    return out


def _compile(plan):
    """The body's backward as one straight-line function, as ``cell._compile`` writes its
    forward: per member, its gradient popped, its rule called on operands named directly, each
    operand's gradient added where it goes. Layouts are walked once, here."""
    env = {"_indices": _indices, "_nested": _nested, "_wants": _wants, "_leaf": leaf_of}
    rename = _renames(plan)
    multi = {node for step in plan.steps for s in getattr(step, "originals", (step,))
             if s.payload.part_cls for node in s.members}
    # multi-output ops whose whole value the forward keeps: their parts' gradients add into
    # the whole's in place, written out here (GR.add's general path costs ~5 us a part)
    wholes = {node for step in plan.steps if step.mode in ("one", "join", "calls") and step.payload.kind == "op"
              and step.payload.part_cls for node in step.members}
    lines = []
    for i in range(len(plan.steps) - 1, -1, -1):
        step = plan.steps[i]
        body = []
        for s in getattr(step, "originals", (step,)):
            for m in range(len(s.members)):
                body += _member_lines(env, s, m, rename, multi, wholes, f"{i}_{len(body)}")
        if plan.join is not None and i == plan.join[0]:
            body = ["if not joined:", *("    " + x for x in body or ["pass"])]
        lines += body
    src = ("def run(xp, GR, V, G, ST, calls, index_args, joined):\n    OW = GR.owned\n"
           + "\n".join("    " + x for x in lines or ["pass"]))
    exec(compile(src, f"<la.cell {plan.name} backward>", "exec"), env)
    return env["run"]


def _member_lines(env, step, m, rename, multi, wholes, tag):
    payload, node = step.payload, step.members[m]
    refs, aux = step.refs[m], step.aux[m]
    ref = node << PART_BITS
    if payload.kind == "cell":
        env[f"p{tag}"], env[f"r{tag}"], env[f"a{tag}"] = payload, refs, aux
        outs = ([f"GR.pop({ref + p + 1})" for p in range(len(payload.part_cls))] if payload.part_cls
                else [f"GR.pop({ref})"])
        return [f"o = [{', '.join(outs)}]",
                "if any(x is not None for x in o):",
                f"    _nested(xp, p{tag}, r{tag}, a{tag}, o, GR, calls, index_args)"]
    operands, stacked, needs, gives, slot = [], [], [], [], 0

    def operand(spec, j):
        kind = spec[0]
        if kind == "stacked":
            r = refs[spec[1]]
            wants = CLASSES[spec[2]][1].kind in "fc"
            return f"V[{r}]", True, "True" if wants else "False", (r if wants else None)
        if kind == "shared":
            env[f"c{tag}_{j}"] = spec[1]
            return f"c{tag}_{j}", False, f"_wants({-spec[2]})", ("leaf", -spec[2])
        env[f"c{tag}_{j}"] = spec[1]
        return f"c{tag}_{j}", False, "False", None

    for j, spec in enumerate(payload.layout):
        kind = spec[0]
        if kind == "index":
            size = 1
            for d in spec[1]:
                size *= d
            if spec[1] == () and aux[slot] <= IndexArg.sentinel_base:   # one integer argument: as the
                operands.append(f"V[{_index_key(IndexArg.sentinel_base - aux[slot])}]")  # forward read it
            else:
                env[f"x{tag}_{j}"] = [aux]
                operands.append(f"_indices(x{tag}_{j}, {slot}, {size}, {spec[1]!r}, calls, index_args)")
            needs.append("False")
            gives.append(None)
            slot += size
        elif kind == "list":
            items = [operand(s, f"{j}_{k}") for k, s in enumerate(spec[1])]
            operands.append(f"[{', '.join(x[0] for x in items)}]")
            stacked.append(tuple(x[1] for x in items))
            needs.append(f"({', '.join(x[2] for x in items)},)")
            gives.append([x[3] for x in items])
        else:
            v, f, nd, t = operand(spec, j)
            operands.append(v)
            stacked.append(f)
            needs.append(nd)
            gives.append(t)
    if all(g is None or isinstance(g, list) and all(x is None for x in g) for g in gives):
        return []
    local = payload.op.vjp_aligned
    if local is not None and all(s[0] == "const" or s[0] == "stacked" and s[2] == payload.out_cls
                                 for s in payload.layout):
        # an elementwise op on values of its result's shape (and constants): no broadcasting to
        # undo, so each operand's aligned rule is called directly
        args = ", ".join(["xp", "g", f"V[{ref}]", *operands])
        out = [f"g = GR.pop({ref})", "if g is not None:"]
        for j, target in enumerate(gives):
            if target is not None:
                env[f"l{tag}_{j}"] = local[j]
                out += [f"    r{j} = l{tag}_{j}({args})", *_give_lines(target, f"r{j}", rename, multi, wholes)]
        return out
    if len(stacked) == 1 and isinstance(stacked[0], tuple):
        stacked = stacked[0]
    env[f"f{tag}"], env[f"s{tag}"], env[f"k{tag}"] = payload.op.vjp, tuple(stacked), payload.attrs
    deferred = []
    product = _product(payload)
    if product is not None:     # the weight's (and bias's) gradient: one GEMM at the end
        deferred = [f"    ST.product({product[0]}, {product[1]}, g, {operands[1]})"]
        needs[0], gives[0] = "False", None
        if product[1]:
            needs[2], gives[2] = "False", None
    out = [f"g = GR.pop({ref})",
           "if g is not None:",
           f"    r = f{tag}(xp, s{tag}, ({', '.join(needs)},), g, V[{ref}], {', '.join(operands)}, **k{tag})",
           *deferred]
    for j, target in enumerate(gives):
        if isinstance(target, list):
            for k, t in enumerate(target):
                out += _give_lines(t, f"r[{j}][{k}]", rename, multi, wholes)
        else:
            out += _give_lines(target, f"r[{j}]", rename, multi, wholes)
    return out


def _product(payload):
    """(weight, bias) parameter ids of a batch of ``W @ x_i`` (+ ``b``) with a shared weight,
    whose gradients ``Staging.product`` makes at the end (bias 0: by its own rule), else None."""
    if not arrange.reads_weight(payload) or not payload.layout[0][2]:
        return None
    bias = payload.layout[2] if payload.op.name == "affine" else None
    shared = bias is not None and bias[0] == "shared" and np.shape(bias[1]) == CLASSES[payload.out_cls][0]
    return -payload.layout[0][2], (-bias[2] if shared else 0)


def _give_lines(target, value, rename, multi, wholes):
    """Source adding ``value`` (a gradient, or None) where it goes."""
    if target is None:
        return []
    if isinstance(target, tuple):       # a parameter: staged, added to it when the pass ends
        return [f"    if {value} is not None:", f"        l = _leaf({target[1]})",
                f"        if l is not None: ST.add(l, {value})"]
    to = rename.get(target, target)
    if not isinstance(to, list) and to & PART_MASK and to >> PART_BITS in wholes:
        whole = to & ~PART_MASK
        return [f"    if {value} is not None:", f"        W = G.get({whole})",
                f"        if W is None or id(W) not in OW: W = GR.whole({whole})",
                f"        W[:, {(to & PART_MASK) - 1}] += {value}"]
    if isinstance(to, list) or to & PART_MASK or to >> PART_BITS in multi:
        return [f"    if {value} is not None: GR.add({target}, {value})"]
    return [f"    if {value} is not None:", f"        t = G.get({to})",
            f"        G[{to}] = {value} if t is None else t + {value}"]


def _wants(pid) -> bool:
    leaf = leaf_of(pid)
    return leaf is not None and leaf.requires_grad


def _nested(xp, payload, refs, aux, outs, grads, calls, index_args):
    """A cell called in the body: its body's values computed again for these calls, then its
    backward; its arguments' gradients go to this body's values."""
    plan = payload.plan
    arrays = [grads.values[refs[s[1]]] for s in payload.layout if s[0] == "stacked"]
    ints = [_indices([aux], j, 1, (), calls, index_args) for j in range(len(aux))]
    inner = _Grads(xp, grads.staging)
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
