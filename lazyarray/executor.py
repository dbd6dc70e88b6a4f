"""Runs a schedule: one batched kernel per batch, operands as views when they already sit
contiguously and in order (DyNet §3.3), else gathered into a preallocated buffer (one ``take``,
or fancy indexing from a strided value: ``take`` would copy it whole first); results written once into per-class arenas; reshaping ops alias instead of copying.

Every value lives in a *base*: an array (N, *shape) that is either an arena (one per result
class and flush) or a view of one (a split's parts, a reshape, a transpose, a slice). A node's
location is (base id, row), kept in two int arrays so a batch is located with numpy indexing.

A flush runs in two steps. ``compile`` decides, from the structure alone, where every value
lives and how each batch reads its operands; the ``Program`` it returns then only allocates
arenas and calls kernels. The plan cache keeps programs with their schedules, so a scope of a
known structure skips the index arithmetic (a dozen numpy calls per operand per batch, ~10 µs,
as much as a small kernel) and only reads its new per-node data (word ids, labels, inputs).
"""
from __future__ import annotations

import threading
import time

import numpy as np

import batching
from ops_registry import ShapeError
from ops_registry.kernels import take_rows, view_reshape

from . import arrange
from .array import CLASSES, joins_rows

PART_BITS, PART_MASK = batching.PART_BITS, batching.PART_MASK
_buffers = threading.local()

# operand recipes, by their first item
_CONST, _SLICE, _TAKE, _MIXED, _DYNAMIC, _INDEX, _LIST = range(7)
# steps, by their first item
_OP, _GATHER, _CELL, _INPUT = range(4)
_FEW = 4    # rows of a join's column that ``Executor._put_late`` copies value by value


class Program:
    """A compiled flush. ``recipes`` make its new bases in order (("arena", shape, dtype) or
    ("view", parent, make)), ``links`` restore the views shared between them, ``base_of`` and
    ``row_of`` place every node, ``steps`` call the kernels. Base ids are those of the flush
    it was compiled from (``first``), shifted when it is replayed. ``replayable`` is False when
    the flush placed values in memory of an earlier flush (an alias of an older value)."""

    __slots__ = ("first", "recipes", "links", "base_of", "row_of", "steps", "capacity", "replayable", "plans",
                 "distinct", "joins")

    def __init__(self, first, recipes, links, base_of, row_of, steps, capacity, replayable, joins):
        self.first, self.recipes, self.links = first, recipes, links
        self.base_of, self.row_of, self.steps = base_of, row_of, steps
        self.capacity, self.replayable = capacity, replayable
        #: index of an ``_OP`` step that joins rows (``_row_join``) -> its items of earlier
        #: flushes: (their positions in the list, their input slots (items, calls))
        self.joins = joins
        #: the traced cell bodies it runs (their bindings are checked before it runs)
        self.plans = tuple({id(s[1]): s[1] for s in steps if s[0] == _CELL}.values())
        #: id of a rows array of its steps -> whether its rows are distinct (a backward's scatter)
        self.distinct: dict = {}


class Executor:
    def __init__(self, backend, stats):
        self.backend = backend
        self.xp = backend.xp
        self.stats = stats
        self.bases: list = []
        self.base_of = np.zeros(0, dtype=np.int64)
        self.row_of = np.zeros(0, dtype=np.int64)
        self.recipes: list = []  # per base, how it was made (absolute ids): the backward mirrors it
        self.runs: list = []     # per flush run: (program, view, shift), what a backward replays
        self.saved: dict = {}    # (run, step) -> a cell batch's body values, while a backward is pending
        self.saving = False      # whether cell batches keep their body values (a backward is pending)
        self._derived: dict = {}
        # per memory (its owner's id), (byte range, array) of each join made in place there
        # (see ``value``): a forced value is checked against its own memory's joins only
        self._joined: dict = {}
        # while compiling: [recipes, links, replayable, first new base, new bases that view an
        # earlier flush's memory]
        self._compiling = None

    # -- locations ----------------------------------------------------------------------------
    def value(self, ref: int):
        """A view of the value; read-only where it shares memory with a join made in place
        (a value read by one, an alias of such a value, or the join): numpy's stack and
        concatenate copy, so writing into the one must not change the other."""
        node, part = ref >> PART_BITS, ref & PART_MASK
        base_id = self.base_of.item(node)
        value = self.bases[self._part_base(base_id, part) if part else base_id][self.row_of.item(node), ...]
        return self._guarded(value) if self._joined else value

    def _guarded(self, value):
        """``value``, or a read-only view of it where it shares memory with a join made in place."""
        if isinstance(value, np.ndarray) and value.size:
            joins = self._joined.get(_owner(value))
            if joins:
                lo, hi = _extent(value)
                if any(a < hi and lo < b and _shares(value, joined) for a, b, joined in joins):
                    value = value.view()
                    value.flags.writeable = False
        return value

    def copies(self, refs) -> list:
        """Copies of the values of node references ``refs``, located all at once."""
        refs = np.asarray(refs, dtype=np.int64)
        nodes, bases, part_base = refs >> PART_BITS, self.bases, self._part_base
        return [(bases[part_base(b, p)] if p else bases[b])[r, ...].copy()
                for b, r, p in zip(self.base_of[nodes].tolist(), self.row_of[nodes].tolist(),
                                   (refs & PART_MASK).tolist())]

    def _add_base(self, array, recipe) -> int:
        if self._compiling is not None:
            self._compiling[0].append(recipe)
        self.bases.append(array)
        self.recipes.append(recipe)
        return len(self.bases) - 1

    def _derived_base(self, base_id: int, how, make):
        """A view ``make(xp, base)`` of base ``base_id`` (a part of a split, an alias), made
        once and cached; -1 where there is no such view."""
        self._reads(base_id)
        key = (base_id, how)
        bid = self._derived.get(key)
        if bid is None:
            base = self.bases[base_id]
            view = make(self.xp, base)
            # a copy is no view: it holds the base as it is now, not when read; an empty view
            # shares no memory (may_share_memory is False) and holds nothing to go stale
            if view is not None and view.size and not self.xp.may_share_memory(view, base):
                view = None
            bid = -1 if view is None else self._add_base(view, ("view", base_id, make))
            if bid >= 0 and self._compiling is not None and self._earlier(base_id):
                self._compiling[4].add(bid)
            self._link(key, bid)
        return bid

    def _earlier(self, base_id) -> bool:
        """Whether base ``base_id`` is memory of an earlier flush: one of its bases, or a view of
        one made in this flush (an alias or a split part of an older value)."""
        return base_id < self._compiling[3] or base_id in self._compiling[4]

    def _reads(self, base_id):
        """A compiled step or view depends on base ``base_id``: one of an earlier flush makes
        the program valid for this flush only."""
        if self._compiling is not None and base_id < self._compiling[3]:
            self._compiling[2] = False

    def _link(self, key, bid):
        self._restore(key, bid)
        if self._compiling is not None and bid >= 0:
            self._compiling[1].append((key[0], key[1], bid))

    def _restore(self, key, bid):
        self._derived[key] = bid
        if bid >= 0 and key[1][0] == "join" and isinstance(self.bases[bid], np.ndarray) and self.bases[bid].size:
            join = self.bases[bid]
            self._joined.setdefault(_owner(join), []).append((*_extent(join), join))

    def _part_base(self, base_id: int, part: int) -> int:
        return self._derived_base(base_id, ("part", part), lambda xp, b: b[:, part - 1])

    def _locate(self, refs):
        """(single base id, rows) of the values ``refs`` name, or (-1, (keys, rows)) where they
        lie in several bases (a key per value: its base id and output part in one int)."""
        nodes = refs >> PART_BITS
        keys = (self.base_of[nodes] << PART_BITS) | (refs & PART_MASK)
        rows = self.row_of[nodes]
        k0 = int(keys[0])
        if not (keys == k0).all():
            return -1, (keys, rows)
        b0, p0 = k0 >> PART_BITS, k0 & PART_MASK
        return (self._part_base(b0, p0) if p0 else b0), rows

    def _grow(self, total):
        if len(self.base_of) < total:
            grow = max(total, 2 * len(self.base_of))
            self.base_of = np.resize(self.base_of, grow)
            self.row_of = np.resize(self.row_of, grow)

    # -- compiling a flush --------------------------------------------------------------------
    def compile(self, view, batches, payloads, rows=None) -> Program:
        """Place every node of ``view`` and turn each batch into a step; ``rows`` (per local
        node, from a memory plan) fixes where each result lives in its class arena, else
        results take rows in batch order. Leaves the flush's bases made and its nodes placed,
        ready for ``run(program, ..., replay=False)``."""
        t0 = time.perf_counter()
        first = len(self.bases)
        self._compiling = [[], [], True, first, set()]
        self._rows = rows
        self._grow(view.start + len(view))
        sigs = view.sig[[b[0] for b in batches]].tolist() if batches else []
        kinds = [payloads[s] for s in sigs]
        for payload, s in zip(kinds, sigs):
            if payload.form is None:
                payload.form = Form(payload, view.table.nref[s], view.table.naux[s])
        self._capacity = _capacity(kinds, batches)
        try:
            arenas = self._plan(kinds, batches)
            steps, joins = [], {}
            for batch, payload in zip(batches, kinds):
                if payload.kind == "op":
                    step = self._compile_op(view, batch, payload, arenas)
                    if step is not None and step[0] == _OP and payload.form.row_join:
                        joins[len(steps)] = self._late
                elif payload.kind == "cell":
                    step = self._compile_cell(view, batch, payload, arenas)
                else:
                    claim = self._claim(arenas, payload.out_cls, batch)
                    self._place(view, batch, claim[0], claim[1])
                    step = _INPUT, view.offsets[batch], claim, payload.out_cls
                if step is not None:
                    steps.append(step)
            recipes, links, replayable = self._compiling[:3]
        finally:
            self._compiling = None
        end = view.start + len(view)
        placed = self.base_of[view.start:end].copy()
        replayable = replayable and bool((placed >= first).all())
        program = Program(first, recipes, links, placed, self.row_of[view.start:end].copy(), steps,
                          self._capacity, replayable, joins)
        self.stats.times["plan"] += time.perf_counter() - t0
        return program

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
        if not isinstance(cls, tuple):
            shape, dtype = (rows,) + CLASSES[cls][0], CLASSES[cls][1]
            return self._add_base(self.backend.empty(shape, dtype), ("arena", shape, dtype))
        ids = [self._arena(c, rows) for c in cls]
        for p, bid in enumerate(ids):
            self._link((ids[0], ("part", p + 1)), bid)
        return ids[0]

    def _claim(self, arenas, cls, batch):
        """Where a batch's results go: (arena id, their rows, first row when the rows are
        consecutive else -1)."""
        arena, n = arenas[cls], len(batch)
        if self._rows is None:
            start = arena[1]
            arena[1] = start + n
            return arena[0], np.arange(start, start + n), start
        rows = self._rows[batch]
        r0 = int(rows[0])
        consecutive = int(rows[-1]) - r0 == n - 1 and (n < 3 or (np.diff(rows) == 1).all())
        return arena[0], rows, (r0 if consecutive else -1)

    def _place(self, view, batch, base_id, rows):
        nodes = batch + view.start
        self.base_of[nodes] = base_id
        self.row_of[nodes] = rows

    def _compile_op(self, view, batch, payload, arenas):
        op = payload.op
        offsets = view.offsets[batch]
        if op.alias is not None and self._alias(view, batch, payload, offsets):
            return None
        if op.gather_view is not None:
            step = self._compile_gather(view, batch, payload, offsets, arenas)
            if step is not False:
                return step
        stacked, operands = [], []
        form = payload.form
        aux = form.nref
        located = iter(self._stacked(view, form.slots + offsets, form.specs)) if form.specs else None
        for spec, items in zip(payload.layout, form.items):
            kind = spec[0]
            if kind == "list":
                flags, recipes = self._items(view, items, offsets)
                stacked.append(flags)
                operands.append((_LIST, recipes))
            elif kind == "index":
                size = int(np.prod(spec[1], dtype=np.int64))
                operands.append((_INDEX, offsets[:, None] + (aux + np.arange(size)), (len(batch),) + spec[1]))
                aux += size
            elif kind == "stacked":
                stacked.append(True)
                operands.append(next(located))
            else:   # a parameter's id with it, for its gradient
                stacked.append(False)
                operands.append((_CONST, spec[1], spec[2] if kind == "shared" else 0))
        if len(stacked) == 1 and isinstance(stacked[0], tuple):
            stacked = stacked[0]
        claim = self._claim(arenas, payload.out_cls, batch)
        self._place(view, batch, claim[0], claim[1])
        return _OP, op, tuple(stacked), operands, payload.attrs, claim, payload.out_cls, form.reads_weight

    def _compile_cell(self, view, batch, payload, arenas):
        offsets = view.offsets[batch]
        form = payload.form
        args = self._stacked(view, form.slots + offsets, form.specs) if form.specs else []
        ints = [offsets + slot for slot in form.ints]
        join = self._compile_join(payload, args)
        claim = self._claim(arenas, payload.out_cls, batch)
        targets = [self._part_base(claim[0], p + 1) for p in range(len(payload.part_cls))] \
            if payload.part_cls else [claim[0]]
        self._place(view, batch, claim[0], claim[1])
        return _CELL, payload.plan, args, ints, claim, targets, join

    def _compile_join(self, payload, args):
        """The body's join of arguments (``CellPlan.join``) as gathers straight into its result,
        when the arguments are not all views already and each lies in one base of this flush:
        one gather for all where they share a base (base id, rows (calls, k)), else one per
        argument (base id None, a (base id, rows) per argument: an LSTM's [x; h]). Their
        recipes then become None. Where each argument lies is read off its recipe: locating
        the joined values again cost an LSTM batch three more lookups."""
        plan = payload.plan
        if plan.join is None:
            return None
        step, positions = plan.join
        recipes = [args[p] for p in positions]
        if all(r[0] == _SLICE for r in recipes) or any(r[0] != _SLICE and r[0] != _TAKE for r in recipes):
            return None     # (a _DYNAMIC one is of an earlier flush, a _MIXED one in several bases)
        # consecutive rows as a slice (copied and added to as such): a _TAKE's never are
        parts = tuple((r[1], slice(r[2], r[3]) if r[0] == _SLICE else r[2]) for r in recipes)
        for p in positions:
            args[p] = (_CONST, None, 0)
        body = plan.steps[step].payload
        base_id = parts[0][0]
        for b, _ in parts:
            self._reads(b)
        if any(b != base_id for b, _ in parts):
            return None, parts, body.op, body.attrs, body.out_cls
        rows = np.stack([np.arange(r.start, r.stop) if r.__class__ is slice else r for _, r in parts], axis=1)
        joined = self._joined_view(base_id, rows.ravel(), len(rows), body.out_cls, "body join")
        if joined >= 0:
            return joined, None, body.op, body.attrs, body.out_cls
        return base_id, rows, body.op, body.attrs, body.out_cls

    def _stacked(self, view, positions, specs):
        """Recipes of a batch's per-node operands (``positions``: their input slots, one row per
        operand; ``specs``: each one's (class, slot)): ``_fetch_recipe``'s, or ``_DYNAMIC``
        where an operand has values of an earlier flush (looked up per run). All operands are
        located at once: a dozen numpy calls a batch, not a dozen per operand (an LSTM cell's
        x, h and c)."""
        refs = view.ins[positions]
        n = refs.shape[1]
        nodes = refs >> PART_BITS
        keys = (self.base_of[nodes] << PART_BITS) | (refs & PART_MASK)
        rows = self.row_of[nodes]
        early = (refs.min(axis=1) < view.start << PART_BITS).tolist()
        one = (keys == keys[:, :1]).all(axis=1).tolist()
        runs = (rows[:, 1:] - rows[:, :-1] == 1).all(axis=1).tolist()
        first, r0 = keys[:, 0].tolist(), rows[:, 0].tolist()
        out = []
        for j, (cls, slot) in enumerate(specs):
            if early[j]:
                out.append((_DYNAMIC, positions[j], cls, slot))
            elif not one[j]:
                out.append(self._recipe(-1, (keys[j], rows[j]), n, cls, slot))
            else:
                b, p = first[j] >> PART_BITS, first[j] & PART_MASK
                b = self._part_base(b, p) if p else b
                out.append((_SLICE, b, r0[j], r0[j] + n) if runs[j] else (_TAKE, b, rows[j], cls, slot))
        return out

    def _items(self, view, items, offsets):
        """(stacked? flags, recipes) of a join's items (``Form.items``), as ``_operand`` makes
        them, with the references of all of them read at once (a stack of a parser's loss
        terms has dozens). Leaves in ``_late`` the items made by earlier flushes, for
        ``_run_join``: (their positions in the list, their input slots (items, calls))."""
        flags, recipes, at, slots = items
        recipes = list(recipes)
        late = [], None
        if at:
            positions = slots + offsets
            located = self._stacked(view, positions, [recipes[j] for j in at])
            for j, recipe in zip(at, located):
                recipes[j] = recipe
            rows = [j for j, recipe in enumerate(located) if recipe[0] == _DYNAMIC]
            if rows:
                late = [at[j] for j in rows], positions if len(rows) == len(at) else positions[rows]
        self._late = late
        return flags, tuple(recipes)

    def _fetch_recipe(self, refs, cls, slot):
        """A view when the values are contiguous and in order, else one gather per base."""
        return self._recipe(*self._locate(refs), len(refs), cls, slot)

    def _recipe(self, base_id, rows, n, cls, slot):
        """``_fetch_recipe`` of ``n`` values ``_locate`` found: (base id, rows), or (-1, (keys,
        rows)) where they lie in several bases."""
        if base_id >= 0:
            r0 = int(rows[0])
            if int(rows[-1]) - r0 == n - 1 and (n < 3 or (rows[1:] - rows[:-1] == 1).all()):
                return _SLICE, base_id, r0, r0 + n
            return _TAKE, base_id, rows, cls, slot
        keys, rows = rows
        groups = []
        for key in np.unique(keys).tolist():
            at = np.flatnonzero(keys == key)
            b, p = key >> PART_BITS, key & PART_MASK
            groups.append((self._part_base(b, p) if p else b, at, rows[at]))
        return _MIXED, groups, cls, slot, n

    def _alias(self, view, batch, payload, offsets) -> bool:
        """Reshaping ops on values of one base: the result is a view of that base, no kernel."""
        spec = payload.layout[0]
        if spec[0] != "stacked":
            return False
        base_id, rows = self._locate(view.ins[offsets + spec[1]])
        if base_id < 0:
            return False
        op, attrs = payload.op, payload.attrs
        alias_id = self._derived_base(base_id, ("alias", id(payload)), lambda xp, b: op.alias(xp, b, **attrs))
        if alias_id < 0:
            return False
        self._place(view, batch, alias_id, rows)
        return True

    def _compile_gather(self, view, batch, payload, offsets, arenas):
        """Stack/concatenate of equal-class values of one base along the first axis: a view
        where they fill consecutive rows in call order (placed, no step: None), else one take
        into the result (the step); False where neither applies."""
        if not payload.form.joins_rows:
            return False
        slots = payload.form.items[0][3].T     # every item is per-node: all of them, as a row
        k, n = slots.shape[1], len(batch)
        base_id, rows = self._locate(view.ins[(offsets[:, None] + slots).ravel()])
        if base_id < 0:
            return False
        joined = self._joined_view(base_id, rows, n, payload.out_cls)
        if joined >= 0:
            self._place(view, batch, joined, np.arange(n))
            return None
        self._reads(base_id)
        claim = self._claim(arenas, payload.out_cls, batch)
        self._place(view, batch, claim[0], claim[1])
        return _GATHER, payload.op, k, payload.attrs, base_id, rows.reshape(n, k), claim, payload.out_cls

    def _joined_view(self, base_id, rows, n, cls, how="join") -> int:
        """The base of a join whose values lie in consecutive rows of one base, value after
        value and call after call (ED-Batch's [h_l; h_r] as one block): those rows reshaped,
        no copy. -1 where they do not, or the rows are not one block of memory. A cell body's
        join (``how`` "body join") lives only while the body runs, so its values stay
        writable."""
        r0, m = int(rows[0]), len(rows)
        if (self._earlier(base_id)  # an earlier flush's value may be forced and written
                or int(rows[-1]) - r0 != m - 1 or not (rows[1:] - rows[:-1] == 1).all()):
            return -1
        shape = (n,) + CLASSES[cls][0]  # in the key: a stack and a concatenate of the same rows differ
        return self._derived_base(base_id, (how, r0, shape), lambda xp, b: view_reshape(b[r0:r0 + m], shape))

    # -- running a flush ----------------------------------------------------------------------
    def run(self, program, view, inputs, replay):
        """Execute a program: right after ``compile`` (``replay`` False), or for a flush of the
        same structure (``replay`` True: its bases are made and its nodes placed first)."""
        t0 = time.perf_counter()
        shift = 0
        if replay:
            shift = len(self.bases) - program.first
            self._replay_bases(program, shift)
            end = view.start + len(view)
            self._grow(end)
            self.base_of[view.start:end] = program.base_of + shift
            self.row_of[view.start:end] = program.row_of
        self._capacity = program.capacity
        self._scratch: dict = {}
        self.runs.append((program, view, shift))
        runners = (self._run_op, self._run_gather, self._run_cell, self._run_input)
        joins = program.joins
        for i, step in enumerate(program.steps):
            if step[0] == _CELL:
                self._run_cell(step, shift, view.ins, inputs, i)
            elif i in joins:
                self._run_join(step, shift, view.ins, joins[i])
            else:
                runners[step[0]](step, shift, view.ins, inputs)
        self._scratch = None
        self.stats.times["execute"] += time.perf_counter() - t0

    def _run_op(self, step, shift, ins, inputs):
        _, op, stacked, operands, attrs, claim, cls, reads_weight = step
        dest = self._destination(claim, cls, shift)
        operands = [self._get(r, shift, ins) for r in operands]
        if reads_weight:
            operands[0] = arrange.weight(self.xp, operands[0], len(dest), self.stats, self._scratch)
        try:
            result = op.batched(self.xp, stacked, *operands, out=dest, **attrs)
        except (ValueError, TypeError) as error:    # data-dependent (an integer to a negative power):
            raise ShapeError(f"la.{op.name} (a batch of {len(dest)}): {error}") from None   # as eagerly
        stats = self.stats
        if result is not dest:
            dest[...] = result
            if getattr(result, "base", None) is None:
                stats.kernels += 1        # computed, then copied in
            stats.copied_bytes += dest.nbytes
        stats.kernels += 1
        self._scatter(claim, dest, shift)

    def _run_join(self, step, shift, ins, late):
        """A stack or concatenate of rows (``_row_join``) written straight into its result, item
        by item: a shared item broadcast, a value of this flush from its recipe, and those of
        earlier flushes located together (one lookup for all where each cost a dozen numpy
        calls: a parser's stack of its loss terms, one per earlier flush, and its feature
        vectors). The kernel's own way gathered every item first, then joined the copies."""
        _, op, _, operands, attrs, claim, cls, _ = step
        dest = self._destination(claim, cls, shift)
        items, bases = operands[0][1], self.bases
        target = op.gather_view(dest, len(items), **attrs)
        for j, recipe in enumerate(items):
            _put(target, j, recipe, bases, shift)
        columns, positions = late
        if columns:
            refs = ins[positions]
            nodes = refs >> PART_BITS
            keys = (self.base_of[nodes] << PART_BITS) | (refs & PART_MASK)
            rows = self.row_of[nodes]
            k0, c0 = keys.item(0), columns[0]
            at = slice(c0, c0 + len(columns)) if columns[-1] - c0 == len(columns) - 1 else columns
            if (keys == k0).all():  # all in one base (a parser's features: its encoder's vectors): one gather
                b, p = k0 >> PART_BITS, k0 & PART_MASK
                target[:, at] = bases[self._part_base(b, p) if p else b][rows.T]
            else:
                self._put_late(target, columns, at, keys.tolist(), rows.tolist(), items)
        self._count_copy(dest.nbytes)
        self._scatter(claim, dest, shift)

    def _put_late(self, target, columns, at, keys, rows, items):
        """``_run_join``'s items of earlier flushes in several bases (columns ``columns`` of
        ``target``, ``at`` as an index): column by column, or on numpy value by value where the
        columns are a few values long (a sentence's loss terms, each made by its own flush: a
        few Python operations per value cost less than numpy's calls per column, 11 against 31
        µs for 60 scalars)."""
        bases, n = self.bases, len(target)
        if n <= _FEW and self.xp is np:
            values = [bases[self._part_base(k >> PART_BITS, k & PART_MASK) if k & PART_MASK else k >> PART_BITS][r]
                      for ks, rs in zip(keys, rows) for k, r in zip(ks, rs)]
            target[:, at] = np.array(values).reshape(len(columns), n, *target.shape[2:]).swapaxes(0, 1)
            return
        for j, ks, rs in zip(columns, keys, rows):
            k0, r0 = ks[0], rs[0]
            if ks.count(k0) == n:
                b, p = k0 >> PART_BITS, k0 & PART_MASK
                base = bases[self._part_base(b, p) if p else b]
                target[:, j] = base[r0:r0 + n] if rs[-1] - r0 == n - 1 and rs == list(range(r0, r0 + n)) \
                    else base[rs]
                continue
            _put(target, j, self._recipe(-1, (np.array(ks), np.array(rs)), n, *items[j][2:]), bases, 0)

    def _run_gather(self, step, shift, ins, inputs):
        _, op, k, attrs, base_id, rows, claim, cls = step
        dest = self._destination(claim, cls, shift)
        target = op.gather_view(dest, k, **attrs)
        take_rows(self.xp, self.bases[base_id + shift], rows, out=target)
        self._count_copy(target.nbytes)
        self._scatter(claim, dest, shift)

    def _run_cell(self, step, shift, ins, inputs, index=0):
        _, plan, args, ints, claim, targets, join = step
        # a pending backward keeps the arguments with the body's values: gathered into memory
        # of their own then, not into the reused buffers
        fresh = self.saving
        args = [self._get(r, shift, ins, fresh) for r in args]
        rows, start = claim[1], claim[2]
        n = len(rows)
        joined = None
        if join is not None:
            if join[1] is None:  # a view of consecutive rows
                joined = self.bases[join[0] + shift]
            else:
                joined = self.gather_join(join, shift, self._buffer(join[4], "join", n, fresh))
                self._count_copy(joined.nbytes)
        into = None if start < 0 else [self.bases[t + shift][start:start + n] for t in targets]
        try:
            if self.saving:
                outputs, values = plan.run_saving(self.xp, args, n, self.stats, [ins[p] for p in ints],
                                                  self._scratch, into, joined)
                self.saved[(len(self.runs) - 1, index)] = values
            else:
                outputs = plan.run(self.xp, args, n, self.stats, [ins[p] for p in ints], self._scratch, into, joined)
        except (ValueError, TypeError) as error:
            raise ShapeError(f"cell {plan.name} (a batch of {n}): {error}") from None
        for p, (target, out) in enumerate(zip(targets, outputs)):
            if into is None or out is not into[p]:
                self.bases[target + shift][rows if into is None else slice(start, start + n)] = out
                self._count_copy(out.nbytes)

    def gather_join(self, join, shift, out):
        """A cell batch's join of arguments (``_compile_join``) gathered into ``out``."""
        base_id, at, op, attrs, _ = join
        if base_id is not None:
            take_rows(self.xp, self.bases[base_id + shift], at, out=op.gather_view(out, at.shape[1], **attrs))
            return out
        target = op.gather_view(out, len(at), **attrs)
        for j, (b, rows) in enumerate(at):
            if rows.__class__ is slice:
                target[:, j] = self.bases[b + shift][rows]
            else:
                take_rows(self.xp, self.bases[b + shift], rows, out=target[:, j])
        return out

    def _run_input(self, step, shift, ins, inputs):
        _, positions, claim, cls = step
        dest = self._destination(claim, cls, shift)
        moved = self.backend.stack_into([inputs[i] for i in ins[positions].tolist()], dest)
        if moved:
            self.stats.transfers += 1
            self.stats.transfer_bytes += moved
        self._count_copy(dest.nbytes)
        self._scatter(claim, dest, shift)

    def _replay_bases(self, program, shift):
        for recipe in program.recipes:
            if recipe[0] == "arena":
                self.bases.append(self.backend.empty(recipe[1], recipe[2]))
                self.recipes.append(recipe)
            else:
                self.bases.append(recipe[2](self.xp, self.bases[recipe[1] + shift]))
                self.recipes.append(("view", recipe[1] + shift, recipe[2]))
        for base_id, how, bid in program.links:
            self._restore((base_id + shift, how), bid + shift)

    def _get(self, recipe, shift, ins, fresh=False):
        """An operand's value from its recipe; a gathered one in a reused buffer unless
        ``fresh`` (kept past the next batch: by a backward)."""
        kind = recipe[0]
        if kind == _SLICE:
            return self.bases[recipe[1] + shift][recipe[2]:recipe[3]]
        if kind == _CONST:
            return recipe[1]
        if kind == _TAKE:
            _, base_id, rows, cls, slot = recipe
            buf = take_rows(self.xp, self.bases[base_id + shift], rows, out=self._buffer(cls, slot, len(rows), fresh))
            self._count_copy(buf.nbytes)
            return buf
        if kind == _INDEX:
            return ins[recipe[1]].reshape(recipe[2])
        if kind == _LIST:
            return [self._get(r, shift, ins, fresh) for r in recipe[1]]
        if kind == _DYNAMIC:
            return self._get(self._fetch_recipe(ins[recipe[1]], recipe[2], recipe[3]), 0, ins, fresh)
        _, groups, cls, slot, n = recipe
        buf = self._buffer(cls, slot, n, fresh)
        for base_id, at, rows in groups:
            buf[at] = self.bases[base_id + shift][rows]
            self._count_copy(len(at) * buf[0].nbytes)
        return buf

    def _destination(self, claim, cls, shift=0):
        """Where a kernel writes: the arena rows themselves, or a buffer to scatter from."""
        base_id, rows, start = claim
        if start >= 0:
            return self.bases[base_id + shift][start:start + len(rows)]
        return self._buffer(cls, "out", len(rows))

    def _scatter(self, claim, written, shift):
        base_id, rows, start = claim
        if start < 0:
            self.bases[base_id + shift][rows] = written
            self._count_copy(written.nbytes)

    def _buffer(self, cls, slot, n, fresh=False):
        """Gather buffers, one per (class, operand slot), reused across batches and kept per
        thread for later flushes: fresh ones for every flush cost a page fault per 4 KiB. Sized
        for the largest batch that reads (or writes) the class in the flush, not the largest of
        any class: one batch of 100,000 scalars made a gather of two big values ask for 37 GiB.
        ``fresh``: a new array of its own instead."""
        if fresh:
            shape, dtype = CLASSES[cls]
            return self.backend.empty((n,) + shape, dtype)
        pool = getattr(_buffers, "pool", None)
        if pool is None:
            pool = _buffers.pool = {}
        key = (self.backend.name, cls, slot)
        buf = pool.get(key)
        if buf is None or len(buf) < n:
            shape, dtype = CLASSES[cls]
            buf = pool[key] = self.backend.empty((max(n, self._capacity.get(cls, n)),) + shape, dtype)
        return buf[:n]

    def _count_copy(self, nbytes):
        self.stats.kernels += 1
        self.stats.copied_bytes += int(nbytes)


def _put(target, j, recipe, bases, shift):
    """Column ``j`` of a join's ``target`` from an item's recipe (``Executor._run_join``)."""
    kind = recipe[0]
    if kind == _CONST:
        target[:, j] = recipe[1]
    elif kind == _SLICE:
        target[:, j] = bases[recipe[1] + shift][recipe[2]:recipe[3]]
    elif kind == _TAKE:
        target[:, j] = bases[recipe[1] + shift][recipe[2]]
    elif kind == _MIXED:
        for base_id, at, rows in recipe[1]:
            target[at, j] = bases[base_id + shift][rows]


def _capacity(payloads, batches) -> dict:
    """Per value class, the largest batch of the flush that may gather (or scatter) values of
    it (``Form.classes``)."""
    out: dict = {}
    for payload, batch in zip(payloads, batches):
        n = len(batch)
        for cls in payload.form.classes:
            if out.get(cls, 0) < n:
                out[cls] = n
    return out


class Form:
    """What compiling a batch reads from its signature's payload alone (``Payload.form``),
    worked out on the signature's first batch: a parser's flushes are a few batches of
    recurring signatures in sizes that do not recur, so each compiles, and re-deriving these
    per batch was a third of it.

    ``classes``: the value classes a batch may gather or scatter (its operands, results, cell
    arguments and body join: ``_capacity``); ``nref``: its reference slots; ``specs``: its
    per-node operands' (class, slot) in slot order, ``slots`` those slots as a column;
    ``ints``: its per-node integer slots (a cell's);
    ``items``: per layout entry, for a join's list (flags, recipes with each stacked item's
    (class, slot) in place, where the stacked ones are, their slots as a column), else None;
    ``row_join``, ``joins_rows``, ``reads_weight``: ``_row_join``, ``array.joins_rows``,
    ``arrange.reads_weight``."""

    __slots__ = ("classes", "nref", "specs", "slots", "ints", "items", "row_join", "joins_rows", "reads_weight")

    def __init__(self, payload, nref, naux):
        specs = list(payload.layout)
        for spec in specs:
            if spec[0] == "list":
                specs += spec[1]
        classes = [s[2] for s in specs if s[0] == "stacked"]
        out_cls = payload.out_cls
        classes += list(out_cls) if isinstance(out_cls, tuple) else [out_cls]
        if payload.plan is not None and payload.plan.join is not None:
            classes.append(payload.plan.steps[payload.plan.join[0]].payload.out_cls)
        self.classes = tuple(dict.fromkeys(classes))
        self.nref = nref
        self.specs = [(s[2], s[1]) for s in payload.layout if s[0] == "stacked"]
        self.slots = np.array([s[1] for s in self.specs], dtype=np.int64)[:, None]
        self.ints = range(nref, nref + naux)
        self.items = [_items(spec[1]) if spec[0] == "list" else None for spec in payload.layout]
        op = payload.kind == "op"
        self.row_join = op and _row_join(payload)
        self.joins_rows = op and joins_rows(payload)
        self.reads_weight = arrange.reads_weight(payload)


def _items(specs):
    """``Form.items`` of a join's list of item specs."""
    flags, recipes, at = [], [], []
    for j, spec in enumerate(specs):
        if spec[0] == "stacked":
            at.append(j)
            recipes.append((spec[2], spec[1]))
        else:   # a constant's recipe, as ``Executor._compile_op`` makes it
            recipes.append((_CONST, spec[1], spec[2] if spec[0] == "shared" else 0))
        flags.append(spec[0] == "stacked")
    return tuple(flags), tuple(recipes), at, np.array([specs[j][1] for j in at], dtype=np.int64)[:, None]


def _row_join(payload) -> bool:
    """A stack or concatenate along the first axis whose every item, per-node or shared, has
    the shape and dtype of one row block of its result: a batch of it writes its items
    straight into place (``Executor._run_join``)."""
    layout, op = payload.layout, payload.op
    if op.gather_view is None or len(layout) != 1 or layout[0][0] != "list":
        return False
    shape, dtype = CLASSES[payload.out_cls]
    blocks = op.gather_view(np.empty((1,) + shape, dtype), len(layout[0][1]), **payload.attrs)
    if blocks is None:
        return False
    item = blocks.shape[2:]
    for spec in layout[0][1]:
        if spec[0] == "stacked":
            if CLASSES[spec[2]] != (item, dtype):
                return False
        elif spec[0] != "shared" or spec[1].shape != item or spec[1].dtype != dtype:
            return False
    return True


def _shares(a, b) -> bool:
    """Whether ``a`` and ``b`` share an element, not just a byte range: a join of a split's
    first parts spans the other parts' bytes too, which stay writable."""
    try:
        return np.shares_memory(a, b, max_work=1000)
    except np.exceptions.TooHardError:
        return True


def _owner(a: np.ndarray) -> int:
    """Id of the array that owns ``a``'s memory (numpy points every view at it)."""
    return id(a if a.base is None else a.base)


def _extent(a: np.ndarray) -> tuple[int, int]:
    """The byte range [lo, hi) that a non-empty array's elements span."""
    lo = hi = a.__array_interface__["data"][0]
    for size, stride in zip(a.shape, a.strides):
        if stride < 0:
            lo += stride * (size - 1)
        else:
            hi += stride * (size - 1)
    return lo, hi + a.itemsize
