"""Batch-aware placement of a flush's values (ED-Batch §3) through ``memplan``.

The executor keeps each result class in one arena. Without a plan, a batch's results take the
next rows in schedule order, so an operand is a view only when its producers happened to run in
one batch, in order. With a plan, ``memplan.layout`` chooses the rows of every value and the order
in which each batch runs its nodes so that as many operands as possible are contiguous and
aligned, weighted by bytes: those become views instead of gathers. A join (stack/concatenate)
of values lying interleaved, call after call, is a view of them too; the plan makes such
layouts where one batch makes a join's values (``_Interleaver``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import batching
import memplan

from .array import CLASSES, joins_rows

PART_BITS, PART_MASK = batching.PART_BITS, batching.PART_MASK


@dataclass(frozen=True)
class MemoryPlan:
    batches: list          # the schedule's batches, each in the order the plan runs its nodes
    rows: np.ndarray       # per local node: its row in the arena of its class
    aligned: int           # operands the layout made contiguous and aligned (as it left them:
                           # _Interleaver keeps a change only where more bytes become views)
    operands: int          # operands it was asked about


def _class_bytes(cls) -> int:
    if isinstance(cls, tuple):
        return sum(_class_bytes(c) for c in cls)
    shape, dtype = CLASSES[cls]
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def plan(view, batches, payloads) -> MemoryPlan:
    """Rows for every value of the flush and a run order for every batch.

    A value is named by the node whose rows hold it: a cell's outputs share the rows of the
    cell's node (one arena per output), and a split/reshape/slice that aliases its operand
    shares the operand's rows, so those batches add no constraint of their own."""
    n = len(view)
    node_cls = [None] * n
    root = np.arange(n)
    problems, weights, planned = [], [], []
    read, reader = [], []  # the values each batch reads (their roots), and the batch
    for b, batch in enumerate(batches):
        payload = payloads[int(view.sig[batch[0]])]
        for v in batch.tolist():
            node_cls[v] = payload.out_cls
        sources = []
        joins = payload.kind == "op" and joins_rows(payload)
        # a join's operands (stack/concatenate along the first axis) are no constraint: it
        # copies them whatever their rows unless they lie interleaved, call after call (see
        # _Interleaver), and asking for them contiguous only displaced other batches'
        # operands (LatticeLSTM: 30% more bytes copied)
        for slot in _stacked_slots(payload.layout):
            producers = (view.ins[view.offsets[batch] + slot] >> PART_BITS) - view.start
            if (producers >= 0).all():  # earlier flushes already have their rows
                read.append(root[producers])
                reader.append(np.full(len(batch), b))
                if not joins:
                    sources.append(read[-1])
        if payload.kind == "op" and payload.op.alias is not None and len(sources) == 1:
            root[batch] = sources[0]
            continue
        problems.append(tuple([batch.tolist()] + [s.tolist() for s in sources]))
        weights.append(_class_bytes(payload.out_cls))
        planned.append(b)
    result = memplan.layout(n, problems, weights)
    perm = [np.arange(len(batch)) for batch in batches]
    for b, p in zip(planned, result.perm):
        perm[b] = np.asarray(p, dtype=np.int64)
    rows = np.zeros(n, dtype=np.int64)
    seen: dict = {}
    for v in result.order:
        cls = node_cls[v]
        rows[v] = seen.get(cls, 0)
        seen[cls] = rows[v] + 1
    _Interleaver(view, batches, payloads, perm, rows, node_cls, root, read, reader).run()
    ordered = [batch[p] for batch, p in zip(batches, perm)]
    aligned = sum(sum(flags[1:]) for flags in result.aligned)
    asked = sum(len(flags) - 1 for flags in result.aligned)
    return MemoryPlan(ordered, rows, aligned, asked)


def _stacked_slots(layout):
    for spec in layout:
        if spec[0] == "stacked":
            yield spec[1]
        elif spec[0] == "list":
            yield from (s[1] for s in spec[1] if s[0] == "stacked")


class _Interleaver:
    """Joins read in place. A join of k values per call is a view when they lie interleaved,
    call after call (``Executor._joined_view``); the layout problem cannot ask for that (its
    operands are whole lists), so after it, each join whose values all come from one batch
    that writes one block of rows has that batch run its nodes in the join's order instead,
    the batches that make exactly that batch's operands following it up the chain, where
    that turns more bytes into views than it turns back into gathers."""

    CHAIN = 16  # batches reordered for one join at most
    MIN_BYTES = 4096  # a smaller join (a stack of losses) costs a gather of under a page
    TOUCHED = 64  # batches whose operands may move, at most: a batch that many read stays put

    def __init__(self, view, batches, payloads, perm, rows, node_cls, root, read, reader):
        self.view, self.batches, self.perm, self.rows, self.root = view, batches, perm, rows, root
        self.kinds = [payloads[int(view.sig[batch[0]])] for batch in batches]
        self.node_cls, self.read, self.reader = node_cls, read, reader

    def run(self):
        joins = [b for b in range(len(self.batches)) if self._join(b)
                 and len(self.batches[b]) * _class_bytes(self.kinds[b].out_cls) >= self.MIN_BYTES]
        if not joins:
            return
        self.batch_of = np.empty(len(self.view), dtype=np.int64)
        for b, batch in enumerate(self.batches):
            self.batch_of[batch] = b
        # the base the executor finds a value in: its root's class arena, or for an alias (a
        # split part, a reshape) a view of that arena made per aliasing op
        classes: dict = {}
        alias = np.array([k.kind == "op" and k.op.alias is not None for k in self.kinds])
        self.base = np.where(alias[self.batch_of], self.view.sig + len(self.node_cls),
                             np.array([classes.setdefault(c, len(classes)) for c in self.node_cls])[self.root])
        for c in sorted(joins, key=lambda b: -len(self.batches[b])):
            self._interleave(c)

    def _readers(self, nodes) -> set:
        """The batches that read any of ``nodes``."""
        if isinstance(self.read, list):  # a CSR by value, made at the first call
            read = np.concatenate(self.read or [np.zeros(0, np.int64)])
            order = np.argsort(read, kind="stable")
            self.reader = np.concatenate(self.reader or [np.zeros(0, np.int64)])[order]
            self.read = np.searchsorted(read[order], np.arange(len(self.view) + 1))
        return set(np.unique(batching.gather_ranges(self.read, self.reader, nodes)).tolist())

    def _slots(self, b):
        for spec in self.kinds[b].layout:
            for s in (spec[1] if spec[0] == "list" else (spec,)):
                if s[0] == "stacked":
                    yield s[1], s[2]

    def _refs(self, nodes, slots):
        """Input references of ``nodes`` in ``slots`` (an int, or an array: a column each)."""
        offsets = self.view.offsets[nodes]
        return self.view.ins[offsets + slots if np.ndim(slots) == 0 else offsets[:, None] + slots]

    def _view(self, refs) -> bool:
        """Whether the executor reads ``refs`` (flattened) as one view: one base, rows in order."""
        rows = self._one_base(refs)
        return rows is not None and bool((np.diff(rows) == 1).all())

    def _one_base(self, refs):
        """The rows of ``refs`` (flattened) where they are values of this flush in one base,
        else None."""
        refs = refs.ravel()
        local = (refs >> PART_BITS) - self.view.start
        if (local < 0).any() or ((refs & PART_MASK) != (refs[0] & PART_MASK)).any():
            return None
        bases, rows = self._placed(local)
        return rows if (bases == bases[0]).all() else None

    def _placed(self, local):
        """(base, row) of each value as the executor places it. The values of a join that is a
        view lie in a base of their own, in the order it runs (``Executor._compile_gather``),
        and so do their aliases (in a view of that base): its readers then read them there."""
        root = self.root[local]
        bases, rows, made = self.base[local], self.rows[root], self.batch_of[root]
        for c in np.unique(made).tolist():
            nodes = self.batches[c][self.perm[c]]
            if self._join(c) and self._view(self._refs(nodes, np.array([slot for slot, _ in self._slots(c)]))):
                at = made == c
                order = np.argsort(nodes)
                rows[at] = order[np.searchsorted(nodes[order], root[at])]
                bases[at] = -1 - c - len(self.batches) * np.where(local[at] == root[at], 0, 1 + bases[at])
        return bases, rows

    def _worth(self, b) -> int:
        """Bytes batch ``b`` reads as views."""
        if self.kinds[b].kind == "op" and self.kinds[b].op.alias is not None:
            return 0  # a view of its operand's base, its rows in any order (``Executor._alias``)
        nodes = self.batches[b][self.perm[b]]
        specs = list(self._slots(b))
        if self._join(b):
            return self._view(self._refs(nodes, np.array([slot for slot, _ in specs]))) \
                * len(nodes) * len(specs) * _class_bytes(specs[0][1])
        views = [self._view(self._refs(nodes, slot)) for slot, _ in specs]
        join = self.kinds[b].plan.join if self.kinds[b].kind == "cell" else None
        if join is not None and not all(views[p] for p in join[1]):
            # a cell body's join of arguments in one base is gathered whole unless every one is
            # a view (``Executor._compile_join``): a view among them then saves nothing
            refs = self._refs(nodes, np.array([specs[p][0] for p in join[1]]))
            if self._one_base(refs) is not None:
                joined = self._view(refs)
                for p in join[1]:
                    views[p] = joined
        return sum(len(nodes) * _class_bytes(cls) for (slot, cls), view in zip(specs, views) if view)

    def _join(self, b) -> bool:
        return self.kinds[b].kind == "op" and joins_rows(self.kinds[b])

    def _block(self, b, order) -> bool:
        """Whether batch ``b`` can run its nodes in ``order``: its own values (no aliases), in
        one block of rows, ``order`` a permutation of them, none of its operands of an earlier
        flush."""
        nodes = self.batches[b]
        if self.kinds[b].kind == "op" and self.kinds[b].op.alias is not None:
            return False
        # values of an earlier flush are views or not by rows the plan (replayed for later
        # flushes) cannot know, so a new order may gather them
        if any(((self._refs(nodes, slot) >> PART_BITS) < self.view.start).any() for slot, _ in self._slots(b)):
            return False
        return bool((self.root[nodes] == nodes).all() and (np.diff(np.sort(self.rows[nodes])) == 1).all()
                    and len(order) == len(nodes) and np.array_equal(np.sort(order), np.sort(nodes)))

    def _interleave(self, c):
        nodes = self.batches[c][self.perm[c]]
        refs = self._refs(nodes, np.array([slot for slot, _ in self._slots(c)])).ravel()
        parts = (refs >> PART_BITS) - self.view.start
        if (parts < 0).any() or (refs & PART_MASK).any() or len(np.unique(parts)) < len(parts):
            return
        q = int(self.batch_of[parts[0]])
        if (self.batch_of[parts] != q).any() or self._view(refs):
            return
        rest = np.setdiff1d(self.batches[q], parts)
        rest = rest[np.argsort(self.rows[rest])]
        # the join's values before or after the batch's others, whichever keeps more views
        plans = [p for p in (self._chain(q, np.concatenate(o)) for o in ((parts, rest), (rest, parts))) if p]
        if not plans:
            return
        moved = np.concatenate([self.batches[b] for plan in plans for b in plan])
        touched = {c} | {b for plan in plans for b in plan} | self._readers(moved)
        joins = [b for b in touched if self._join(b)]
        while joins and len(touched) <= self.TOUCHED:  # a join that becomes a view (or stops
            # being one) moves its values, and its readers' operands with them
            new = self._readers(np.concatenate([self.batches[b] for b in joins])) - touched
            touched |= new
            joins = [b for b in new if self._join(b)]
        if len(touched) > self.TOUCHED:
            return
        saved = {b: (self.perm[b], self.rows[self.batches[b]]) for b in touched}
        best, kept = sum(self._worth(b) for b in touched), None
        for plan in plans:
            for b, new in plan.items():
                position = {v: i for i, v in enumerate(self.batches[b].tolist())}
                self.rows[new] = np.sort(self.rows[new])
                self.perm[b] = np.array([position[v] for v in new.tolist()], dtype=np.int64)
            worth = sum(self._worth(b) for b in touched)
            if worth > best:
                best, kept = worth, {b: (self.perm[b], self.rows[self.batches[b]]) for b in plan}
            for b, (p, r) in saved.items():
                self.perm[b], self.rows[self.batches[b]] = p, r
        for b, (p, r) in (kept or {}).items():
            self.perm[b], self.rows[self.batches[b]] = p, r

    def _chain(self, q, order) -> dict:
        """batch -> its nodes in their new order: ``q`` in ``order``, then up the chain."""
        plan = {}
        while order is not None and len(plan) < self.CHAIN and self._block(q, order):
            plan[q] = order
            order, q = self._upstream(q, order, plan)
        return plan

    def _upstream(self, q, order, plan):
        """(new order, batch) for the one batch that makes exactly the values of one operand of
        ``q``, so that it keeps reading them as a view when ``q`` runs in ``order``; (None, q)
        if there is none."""
        for slot, _ in self._slots(q):
            refs = self._refs(order, slot)
            made = (refs >> PART_BITS) - self.view.start
            if (made < 0).any() or (refs & PART_MASK).any():
                continue
            p = int(self.batch_of[made[0]])
            if p not in plan and (self.batch_of[made] == p).all() and len(made) == len(self.batches[p]) \
                    and len(np.unique(made)) == len(made):
                return made, p
        return None, q
