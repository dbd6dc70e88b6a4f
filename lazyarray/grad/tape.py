"""Eager mode's backward. An eager op whose operands carry gradients (a parameter, an input
that asked for one, or the result of such an op) records a ``Node`` in its result's ``_scope``
slot: the op, its operands as given, its attributes and results. ``backward`` walks the nodes
from the loss in reverse order and runs each op's gradient rule on a batch of one, the same
rule a scope runs on a batch of many, so eager and batched gradients cannot disagree."""
from __future__ import annotations

import numpy as np

from ops_registry import ARRAY, ARRAYS, ATTR, INDEX
from ops_registry.gradients import Rows

from ..array import LazyArray, ScopeError, _to_numpy
from .leaf import Leaf, Staging


class Node:
    __slots__ = ("op", "operands", "attrs", "out")

    def __init__(self, op, operands, attrs, out):
        self.op, self.operands, self.attrs, self.out = op, operands, attrs, out


class Finished:
    """The ``_scope`` of a future kept past its scope, which ran with parameters that ask for a
    gradient: the values between it and them are gone, so a backward through it refuses
    instead of leaving those parameters without their share."""

    __slots__ = ()
    why = ("a future of a finished la.batching() scope back to the parameters it was computed from (the scope "
           "let go of what a backward needs); compute the loss and call loss.backward() inside that scope, or "
           "compute the value under la.no_grad() if it needs no gradient")

    def refusal(self) -> ScopeError:
        return ScopeError("no gradient can flow through " + self.why)


FINISHED = Finished()


class Part:
    """The ``_scope`` of output ``index`` of a multi-output node (a split's part)."""

    __slots__ = ("node", "index")

    def __init__(self, node, index):
        self.node, self.index = node, index


def carries(a) -> bool:
    """Whether an eager operand is something a gradient flows back to."""
    if a.__class__ is not LazyArray:
        return False
    s = a._scope
    c = s.__class__
    return c is Node or c is Part or c is Leaf and s.requires_grad or c is Finished


def _source(a):
    """The node (with its output index) or leaf a gradient for operand ``a`` goes to."""
    if a.__class__ is not LazyArray:
        return None
    s = a._scope
    c = s.__class__
    if c is Node:
        return s
    if c is Part:
        return s
    if c is Leaf and s.requires_grad:
        return s
    return None


def _order(root):
    """Nodes reachable from ``root``, each after every node that reads it (reverse post-order,
    iteratively: a long chain would overflow Python's recursion)."""
    seen, order, stack = set(), [], [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:    # marked when visited, not when pushed: a node pushed early may be
            continue            # read again deeper down, and must finish after that reader
        seen.add(id(node))
        stack.append((node, True))
        for a in _flat(node):
            if a.__class__ is LazyArray and a._scope is FINISHED:
                raise FINISHED.refusal()
            s = _source(a)
            if s is None or s.__class__ is Leaf:
                continue
            s = s.node if s.__class__ is Part else s
            if id(s) not in seen:
                stack.append((s, False))
    return order[::-1]


def _flat(node):
    for (name, kind), a in zip(node.op.operands, node.operands):
        if kind == ARRAY:
            yield a
        elif kind == ARRAYS:
            yield from a


def _value(a):
    return a._value if a.__class__ is LazyArray else a


def backward(root: LazyArray, xp=np, seed=None):
    """Accumulate d root / d leaf into every leaf ``root`` depends on (``root`` a scalar), or
    with ``seed`` (an array of root's shape), the vector-Jacobian product seed · d root / d leaf."""
    s = root._scope
    if seed is None:
        seed = xp.ones((), root.dtype)
    if s.__class__ is Leaf:
        s.add(xp, seed)
        return
    grads = {id(s): {s.index: seed} if s.__class__ is Part else seed}
    staging = Staging(xp)
    for node in _checked(root):
        g = grads.pop(id(node), None)
        if g is not None:
            _step(xp, node, g, grads, staging)
    staging.commit()


def _checked(root) -> list:
    """The nodes a backward from ``root`` runs, once each has been found to have a gradient rule
    (before any gradient is computed: nothing is half-updated)."""
    s = root._scope
    order = _order(s.node if s.__class__ is Part else s)
    for node in order:
        if node.op.vjp is None:
            raise NotImplementedError(f"backward(): la.{node.op.name} has no gradient rule, and the loss depends on it")
    return order


class Upstream:
    """An eagerly computed value that carries a gradient (``la.sum(W * W)`` of parameters, which
    a scope computes on the spot), read by a scope as an input node: the scope's backward hands
    the gradient it computes for that input on to the eager nodes behind the value."""

    __slots__ = ("value", "shape", "dtype")

    def __init__(self, value: LazyArray):
        self.value, self.shape, self.dtype = value, value.shape, value.dtype

    def check(self):
        _checked(self.value)

    def add(self, xp, grad, owned=False):
        if isinstance(grad, Rows):
            grad = grad.dense(xp, self.shape, self.dtype)
        backward(self.value, np, _to_numpy(grad))   # the eager nodes hold numpy values


def _step(xp, node, g, grads, staging):
    op, out = node.op, node.out
    if isinstance(out, tuple):      # a multi-output op's gradient is that of its parts, stacked
        g = xp.stack([g.get(p, xp.zeros_like(o)) for p, o in enumerate(out)])
        out = xp.stack(out)
    per_node = any(kind == INDEX or kind == ARRAY and _varies(a) or kind == ARRAYS and any(map(_varies, a))
                   for (_, kind), a in zip(op.operands, node.operands))
    operands, stacked, needs, entries, attrs = [], [], [], [], dict(node.attrs)
    for (name, kind), a in zip(op.operands, node.operands):
        if kind == ARRAY:
            flag = _stacked(a, per_node)
            operands.append(_batch(xp, _value(a), flag))
            stacked.append(flag)
            needs.append(_source(a) is not None)
            entries.append((kind, _source(a), flag))
        elif kind == ARRAYS:
            flags = tuple(_stacked(x, per_node) for x in a)
            operands.append([_batch(xp, _value(x), f) for x, f in zip(a, flags)])
            stacked.append(flags)
            needs.append(tuple(_source(x) is not None for x in a))
            entries.append((kind, [_source(x) for x in a], flags))
        elif kind == INDEX:
            operands.append(xp.asarray(a)[None])
            needs.append(False)
            entries.append((kind, None, None))
        else:
            attrs[name] = a
    if len(stacked) == 1 and isinstance(stacked[0], tuple):
        stacked = stacked[0]
    got = op.vjp(xp, tuple(stacked), tuple(needs), g[None], xp.asarray(out)[None], *operands, **attrs)
    for (kind, source, flag), grad in zip(entries, got):
        if kind == ARRAYS:
            for s, gi, f in zip(source, grad or [None] * len(source), flag):
                _give(xp, s, gi, f, grads, staging)
        elif kind == ARRAY:
            _give(xp, source, grad, flag, grads, staging)


def _varies(a) -> bool:
    """Per-instance data: neither a parameter nor a constant."""
    return not _scalar(a) and not (a.__class__ is LazyArray and a._ref < 0)


def _scalar(a) -> bool:
    return isinstance(a, (int, float, complex, np.generic)) and not isinstance(a, np.ndarray)


def _stacked(a, per_node: bool) -> bool:
    """Per-instance values get a batch axis of one; a parameter is shared (as in a scope) where
    another operand varies per node; constants never have one."""
    if _scalar(a):
        return False
    if a.__class__ is LazyArray and a._ref < 0:
        return not per_node
    return True


def _batch(xp, v, stacked):
    return xp.asarray(v)[None] if stacked else v


def _give(xp, source, grad, stacked, grads, staging):
    if source is None or grad is None:
        return
    if isinstance(grad, Rows):
        if source.__class__ is Leaf:
            staging.add(source, grad)
            return
        grad = grad.dense(xp, _value_shape(source), grad.values.dtype)
    elif stacked:
        grad = grad[0]
    if source.__class__ is Leaf:
        staging.add(source, grad)
        return
    if source.__class__ is Part:
        parts = grads.setdefault(id(source.node), {})
        parts[source.index] = grad + parts[source.index] if source.index in parts else grad
        return
    have = grads.get(id(source))
    grads[id(source)] = grad if have is None else have + grad


def _value_shape(source):
    out = source.node.out[source.index] if source.__class__ is Part else source.out
    return np.shape(out)
