"""Plan caching (JIT-batching §4.3): scopes that record the same structure again (the same model
over same-shaped inputs, training step after training step) reuse the schedule, the memory plan
and the compiled program (``lazyarray.executor``) instead of recomputing them.

The key is the exact structure, compared byte for byte (never just a hash): the scheduler, the
memory-plan switch, the backend, the node signatures and every input reference inside the
segment (node and output part, in slot order; references to earlier flushes count as one
"outside" value). Per-node integer data (word ids, labels) and input values are not part of it,
so new data with the same shape hits. Bounded by entries and by key bytes.

Flushes of code that reads values under ``scope.map`` mostly miss, however keyed while a
program runs a flush's nodes in the order they were recorded: a parser's flush is its
sentences' current steps in task order, and which feature slots each step pads and whether it
adds a loss term vary per step and per sentence, so the sequence recurs only in the tails where
a few long sentences remain (~15% of flushes; 25% with no bound on entries). Keyed on what the
batches are instead (each batch's signature and size, inputs as places in batches), they recur
barely more (26% of four scopes' flushes against 21% keyed as here, both unbounded): how many
sentences pad each slot changes every step, so the batch sizes do. Such flushes rely on a miss being cheap to schedule (``batching.bytype``) and compile.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

MAX_ENTRIES = 32
MAX_BYTES = 64 << 20


class PlanCache:
    def __init__(self, max_entries=MAX_ENTRIES, max_bytes=MAX_BYTES):
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._plans: OrderedDict = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def key(scheduler, view) -> tuple:
        return (scheduler, view.sig.tobytes(), view.refs.tobytes())

    def get(self, key):
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
            return plan

    def put(self, key, plan):
        size = sum(len(k) for k in key[1:])
        if size > self.max_bytes:
            return
        with self._lock:
            if key not in self._plans:
                self._bytes += size
            self._plans[key] = plan
            while len(self._plans) > self.max_entries or self._bytes > self.max_bytes:
                old, _ = self._plans.popitem(last=False)
                self._bytes -= sum(len(k) for k in old[1:])

    def clear(self):
        with self._lock:
            self._plans.clear()
            self._bytes = 0

    def __len__(self):
        return len(self._plans)


PLANS = PlanCache()
