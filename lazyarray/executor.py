"""Runs a schedule: one batched kernel per batch, operands as views when they already sit
contiguously and in order (DyNet §3.3), else gathered with one ``take`` into a preallocated
buffer; results written once into per-class arenas; reshaping ops alias instead of copying.

Every value lives in a *base*: an array (N, *shape) that is either an arena (one per result
class and flush) or a view of one (a split's parts, a reshape, a transpose, a slice). A node's
location is (base id, row), kept in two int arrays so a batch is located with numpy indexing.
"""
from __future__ import annotations

import threading
import time

import numpy as np

import batching

PART_BITS, PART_MASK = batching.PART_BITS, batching.PART_MASK
_buffers = threading.local()


class Executor:
    def __init__(self, backend, stats):
        self.backend = backend
        self.xp = backend.xp
        self.stats = stats
        self.bases: list = []
        self.base_of = np.zeros(0, dtype=np.int64)
        self.row_of = np.zeros(0, dtype=np.int64)
        self._derived: dict = {}

    # -- locations ----------------------------------------------------------------------------
    def value(self, ref: int):
        node, part = ref >> PART_BITS, ref & PART_MASK
        base_id = int(self.base_of[node])
        base = self.bases[self._part_base(base_id, part) if part else base_id]
        return base[int(self.row_of[node]), ...]

    def _add_base(self, array) -> int:
        self.bases.append(array)
        return len(self.bases) - 1

    def _derived_base(self, base_id: int, how, make):
        """A view of base ``base_id`` (a part of a split, an alias), made once and cached."""
        key = (base_id, how)
        bid = self._derived.get(key)
        if bid is None:
            view = make(self.bases[base_id])
            bid = self._derived[key] = -1 if view is None else self._add_base(view)
        return bid

    def _part_base(self, base_id: int, part: int) -> int:
        return self._derived_base(base_id, ("part", part), lambda b: b[:, part - 1])

    def _locate(self, refs):
        """(single base id or -1, rows) of the values ``refs`` name."""
        nodes, parts = refs >> PART_BITS, refs & PART_MASK
        bases, rows = self.base_of[nodes], self.row_of[nodes]
        b0, p0 = bases[0], parts[0]
        if not ((bases == b0).all() and (parts == p0).all()):
            return -1, (bases, parts, rows)
        return (self._part_base(int(b0), int(p0)) if p0 else int(b0)), rows

    # -- a flush ------------------------------------------------------------------------------
    def run(self, view, batches, payloads, inputs, rows=None):
        """Execute ``batches`` of ``view``; ``rows`` (per local node, from a memory plan) fixes
        where each result lives in its class arena, else results take rows in batch order."""
        t0 = time.perf_counter()
        self._rows = rows
        total = view.start + len(view)
        if len(self.base_of) < total:
            grow = max(total, 2 * len(self.base_of))
            self.base_of = np.resize(self.base_of, grow)
            self.row_of = np.resize(self.row_of, grow)
        sig = view.sig
        kinds = [payloads[int(sig[b[0]])] for b in batches]
        arenas = self._plan(kinds, batches)
        biggest = max((len(b) for b in batches), default=0)
        self._scratch: dict = {}
        self._capacity = biggest
        t1 = time.perf_counter()
        self.stats.times["plan"] += t1 - t0
        for batch, payload in zip(batches, kinds):
            if payload.kind == "op":
                self._batch(view, batch, payload, arenas)
            elif payload.kind == "cell":
                self._cell(view, batch, payload, arenas)
            else:
                self._inputs(view, batch, payload, arenas, inputs)
        self._scratch = None
        self.stats.times["execute"] += time.perf_counter() - t1

    def _plan(self, kinds, batches):
        """One arena per result class, sized for the flush; rows handed out in batch order so
        each batch writes one contiguous block."""
        rows: dict[int, int] = {}
        for payload, batch in zip(kinds, batches):
            rows[payload.out_cls] = rows.get(payload.out_cls, 0) + len(batch)
        return {cls: [self._arena(cls, n), 0] for cls, n in rows.items()}

    def _arena(self, cls, rows) -> int:
        """An arena for a class, or for a tuple of classes (a cell's outputs): one arena per
        output, row r of each holding output p of the same call (linked as its parts)."""
        from .array import CLASSES
        if not isinstance(cls, tuple):
            return self._add_base(self.backend.empty((rows,) + CLASSES[cls][0], CLASSES[cls][1]))
        ids = [self._arena(c, rows) for c in cls]
        for p, bid in enumerate(ids):
            self._derived[(ids[0], ("part", p + 1))] = bid
        return ids[0]

    def _claim(self, arenas, cls, batch):
        """(arena id, rows of the batch's results, first row when they are consecutive else -1)."""
        arena, n = arenas[cls], len(batch)
        if self._rows is None:
            start = arena[1]
            arena[1] = start + n
            return arena[0], np.arange(start, start + n), start
        rows = self._rows[batch]
        r0 = int(rows[0])
        consecutive = int(rows[-1]) - r0 == n - 1 and (n < 3 or (np.diff(rows) == 1).all())
        return arena[0], rows, (r0 if consecutive else -1)

    def _destination(self, base_id, rows, start, cls):
        """Where a kernel writes: the arena rows themselves, or a buffer to scatter from."""
        if start >= 0:
            return self.bases[base_id][start:start + len(rows)]
        return self._buffer(cls, "out", len(rows))

    def _scatter(self, base_id, rows, start, written):
        if start < 0:
            self.bases[base_id][rows] = written
            self._count_copy(written.nbytes)

    def _place(self, view, batch, base_id, rows):
        nodes = batch + view.start
        self.base_of[nodes] = base_id
        self.row_of[nodes] = rows

    def _inputs(self, view, batch, payload, arenas, inputs):
        base_id, rows, start = self._claim(arenas, payload.out_cls, batch)
        dest = self._destination(base_id, rows, start, payload.out_cls)
        values = [inputs[i] for i in view.ins[view.offsets[batch]].tolist()]
        moved = self.backend.stack_into(values, dest)
        if moved:
            self.stats.transfers += 1
            self.stats.transfer_bytes += moved
        self._count_copy(dest.nbytes)
        self._scatter(base_id, rows, start, dest)
        self._place(view, batch, base_id, rows)

    def _batch(self, view, batch, payload, arenas):
        op = payload.op
        offsets = view.offsets[batch]
        if op.alias is not None and self._alias(view, batch, payload, offsets):
            return
        if op.gather_view is not None and self._gather(view, batch, payload, offsets, arenas):
            return
        stacked, operands = [], []
        aux = view.table.nref[int(view.sig[batch[0]])]
        for spec in payload.layout:
            kind = spec[0]
            if kind == "list":
                flags, values = zip(*(self._operand(view, s, offsets) for s in spec[1]))
                stacked.append(flags)
                operands.append(list(values))
            elif kind == "index":
                size = int(np.prod(spec[1], dtype=np.int64))
                cols = view.ins[offsets[:, None] + (aux + np.arange(size))]
                operands.append(cols.reshape((len(batch),) + spec[1]))
                aux += size
            else:
                flag, value = self._operand(view, spec, offsets)
                stacked.append(flag)
                operands.append(value)
        if len(stacked) == 1 and isinstance(stacked[0], tuple):
            stacked = stacked[0]
        base_id, rows, start = self._claim(arenas, payload.out_cls, batch)
        dest = self._destination(base_id, rows, start, payload.out_cls)
        result = op.batched(self.xp, tuple(stacked), *operands, out=dest, **payload.attrs)
        stats = self.stats
        if result is not dest:
            dest[...] = result
            if getattr(result, "base", None) is None:
                stats.kernels += 1        # computed, then copied in
            stats.copied_bytes += dest.nbytes
        stats.kernels += 1
        self._scatter(base_id, rows, start, dest)
        self._place(view, batch, base_id, rows)

    def _cell(self, view, batch, payload, arenas):
        offsets = view.offsets[batch]
        args = [self._operand(view, spec, offsets)[1] for spec in payload.layout if spec[0] == "stacked"]
        first = view.table.nref[int(view.sig[batch[0]])]
        ints = [view.ins[offsets + first + j] for j in range(view.table.naux[int(view.sig[batch[0]])])]
        base_id, rows, start = self._claim(arenas, payload.out_cls, batch)
        targets = [self._part_base(base_id, p + 1) for p in range(len(payload.part_cls))] \
            if payload.part_cls else [base_id]
        into = [self.bases[t][start:start + len(batch)] for t in targets] if start >= 0 else None
        outputs = payload.plan.run(self.xp, args, len(batch), self.stats, ints, self._scratch, into)
        for p, (target, out) in enumerate(zip(targets, outputs)):
            if into is None or out is not into[p]:
                self.bases[target][rows if into is None else slice(start, start + len(batch))] = out
                self._count_copy(out.nbytes)
        self._place(view, batch, base_id, rows)

    def _operand(self, view, spec, offsets):
        kind = spec[0]
        if kind == "shared":
            return False, spec[1]
        if kind == "const":
            return False, spec[1]
        return True, self._fetch(view.ins[offsets + spec[1]], spec[2], spec[1])

    def _fetch(self, refs, cls, slot):
        """Operand values: a view when contiguous and in order, else one gather per base."""
        n = len(refs)
        base_id, rows = self._locate(refs)
        if base_id >= 0:
            base = self.bases[base_id]
            r0 = int(rows[0])
            if int(rows[-1]) - r0 == n - 1 and (n < 3 or (np.diff(rows) == 1).all()):
                return base[r0:r0 + n]
            buf = self._buffer(cls, slot, n)
            base.take(rows, axis=0, out=buf)  # the method: np.take adds a wrapper call
            self._count_copy(buf.nbytes)
            return buf
        bases, parts, rows = rows
        buf = self._buffer(cls, slot, n)
        pairs = np.unique(np.stack([bases, parts]), axis=1).T.tolist()
        for b, p in pairs:
            mask = (bases == b) & (parts == p)
            base = self.bases[self._part_base(b, p) if p else b]
            buf[mask] = base[rows[mask]]
            self._count_copy(int(mask.sum()) * buf[0].nbytes)
        return buf

    def _buffer(self, cls, slot, n):
        """Gather buffers, one per (class, operand slot), reused across batches and kept per
        thread for later flushes: fresh ones for every flush cost a page fault per 4 KiB."""
        pool = getattr(_buffers, "pool", None)
        if pool is None:
            pool = _buffers.pool = {}
        key = (self.backend.name, cls, slot)
        buf = pool.get(key)
        if buf is None or len(buf) < n:
            from .array import CLASSES
            shape, dtype = CLASSES[cls]
            buf = pool[key] = self.backend.empty((max(n, self._capacity),) + shape, dtype)
        return buf[:n]

    def _alias(self, view, batch, payload, offsets) -> bool:
        """Reshaping ops on values of one base: the result is a view of that base, no kernel."""
        spec = payload.layout[0]
        if spec[0] != "stacked":
            return False
        base_id, rows = self._locate(view.ins[offsets + spec[1]])
        if base_id < 0:
            return False
        op, attrs = payload.op, payload.attrs
        alias_id = self._derived_base(base_id, ("alias", id(payload)),
                                      lambda b: op.alias(self.xp, b, **attrs))
        if alias_id < 0:
            return False
        self._place(view, batch, alias_id, rows)
        return True

    def _gather(self, view, batch, payload, offsets, arenas) -> bool:
        """Stack/concatenate of equal-class values of one base: one take into the result."""
        specs = payload.layout[0][1]
        if any(s[0] != "stacked" or s[2] != specs[0][2] for s in specs):
            return False
        k, n = len(specs), len(batch)
        slots = np.array([s[1] for s in specs])
        base_id, rows = self._locate(view.ins[(offsets[:, None] + slots).ravel()])
        if base_id < 0:
            return False
        arena_id, out_rows, start = self._claim(arenas, payload.out_cls, batch)
        dest = self._destination(arena_id, out_rows, start, payload.out_cls)
        target = payload.op.gather_view(dest, k, **payload.attrs)
        if target is None:
            if self._rows is None:
                arenas[payload.out_cls][1] -= n  # give the rows back: the kernel path claims them
            return False
        self.bases[base_id].take(rows.reshape(n, k), axis=0, out=target)
        self._count_copy(target.nbytes)
        self._scatter(arena_id, out_rows, start, dest)
        self._place(view, batch, arena_id, out_rows)
        return True

    def _count_copy(self, nbytes):
        self.stats.kernels += 1
        self.stats.copied_bytes += int(nbytes)
