"""Record-time fusion: ``W @ x + b`` and ``log_softmax(z)[label]`` become one node each
(``ops_registry``'s ``Fusion`` declarations), with no change to model code.

A consumer call fuses with its producer when the producer is the last node recorded (nothing
has consumed it yet) and the consumer's only per-node operand: the producer's node is then
rewritten in place into the fused op. Whether the user still holds the producer's handle is
unknowable at that moment, so the handle is *detached* rather than invalidated: it keeps the
recipe of the producer node (signature and input slots) and re-records it the first time it is
used or forced, or computes it eagerly from the executed inputs once its scope has finished.
Unused intermediates (the common case) therefore cost nothing, and a reused one costs one node.
"""
from __future__ import annotations

from ops_registry import ARRAY, REGISTRY, ShapeError

from .array import CLASSES, LazyArray, class_id

RULES: dict = {}  # (producer name, consumer name) -> [(fused op, Fusion)]
for _op in REGISTRY.values():
    for _rule in _op.fuses:
        RULES.setdefault((_rule.producer, _rule.consumer), []).append((_op, _rule))
CONSUMERS = frozenset(consumer for _, consumer in RULES)


class Detached:
    """The ``_scope`` of a producer handle whose node was fused into its consumer: the scope,
    the producer's entry and where its input slots start (``Scope.fuse`` fills them in)."""

    __slots__ = ("scope", "entry", "offset")

    def value(self, handle):
        self.revive(handle)
        return handle.asnumpy()

    def revive(self, handle):
        """Make ``handle`` a future again (or a concrete value once the scope is done)."""
        scope, entry = self.scope, self.entry
        if scope.failed is not None:
            scope.value(handle)  # raises the scope's error
        if scope._active:
            scope.check_thread()    # before its graph is touched
            refs, aux = self._slots()
            handle._scope, handle._ref = scope, scope.append(entry, refs, aux)._ref
            return
        refs, aux = self._slots()
        payload = scope.table.payload[entry[0]]
        values = iter(scope.executor.value(r) for r in refs)
        operands = _operands(payload.layout, lambda spec: next(values))
        from .scope import EAGER
        handle._value = EAGER[0](payload.op, operands, payload.attrs)._value
        handle._scope, handle._ref = None, 0

    def _slots(self):
        scope, sig = self.scope, self.entry[0]
        nref, naux = scope.table.nref[sig], scope.table.naux[sig]
        slots = scope.graph.ins[self.offset:self.offset + nref + naux]
        return slots[:nref], slots[nref:]


def _operands(layout, stacked):
    """The operand values of a recorded op: ``stacked(spec)`` for per-node ones; None when the op
    has operands other than arrays (lists, indices) that fusion does not rebuild."""
    out = []
    for spec in layout:
        kind = spec[0]
        if kind == "stacked":
            out.append(stacked(spec))
        elif kind == "shared":
            value = spec[1]
            out.append(LazyArray(None, spec[2], class_id(value.shape, value.dtype), value))
        elif kind == "const":
            out.append(spec[1])
        else:
            return None
    return out


def fused_entry(scope, producer_sig, consumer_entry, operands, position):
    """The entry of the fused op for this (producer, consumer) signature pair, or None."""
    table = scope.table
    producer, consumer = table.payload[producer_sig], table.payload[consumer_entry[0]]
    if producer.kind != "op" or consumer.kind != "op" or any(k != ARRAY for _, k in producer.op.operands):
        return None
    nref, naux = table.nref[producer_sig], table.naux[producer_sig]
    slots = iter(scope.graph.ins[len(scope.graph.ins) - nref - naux:])
    inputs = _operands(producer.layout, lambda spec: LazyArray(scope, next(slots), spec[2], None))
    if inputs is None:
        return None
    first = producer.layout[0]
    ndim = first[1].ndim if first[0] == "shared" else len(CLASSES[first[2]][0]) if first[0] == "stacked" else 0
    produced = [a._ref for a in inputs if a.__class__ is LazyArray and a._scope is scope]
    rest = [a for i, a in enumerate(operands) if i != position]
    for op, rule in RULES.get((producer.op.name, consumer.op.name), ()):
        if position and not rule.commutes:
            continue
        attrs = rule.attrs(producer.attrs, consumer.attrs, ndim)
        if attrs is None:
            continue
        try:
            entry, refs, _ = scope.entry(op, inputs + rest, attrs)
        except (ShapeError, ValueError, TypeError, IndexError):
            continue
        if refs == produced and entry[1] == consumer_entry[1] and not entry[3] and not consumer_entry[3]:
            return entry
    return None
