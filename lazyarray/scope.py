"""The batching scope: records calls into a flat graph, schedules and executes it when a value is
needed (forcing) or when the scope exits.

Recording is the product's overhead, so the per-call path is a key tuple, one dict lookup and a
few appends to the graph's columns; everything slow (shape inference, validation, labels) happens
once per signature, when a key is first seen.
"""
from __future__ import annotations

import collections
import contextvars
import functools
import itertools
import os
import sys
import threading
import time
import weakref

import greenlet
import numpy as np

import batching
from ops_registry import ARRAY, ARRAYS, INDEX, OpDef, ShapeError

from .array import (CLASSES, NUMPY_INTS, NUMPY_SCALARS, PARAM_NAMES, LazyArray, ScopeError, class_id, handle_source, new_parameter,
                    scalar_key)
from .backends import get_backend
from .cell import CellError, IndexArg, parameters_of, rebuild, rekey, static_key, trace
from . import bindings, collector, fusion, memory
from .executor import Executor
from .footprint import footprint
from .grad.flush import Backward, rule_missing
from .grad.leaf import ENABLED as GRAD, Leaf, leaf_of
from .grad.tape import FINISHED, Node, Part, Upstream
from .keys import call_keys
from .fusion import CONSUMERS
from .plancache import PLANS
from .state import SCOPE
from .stats import Stats
from .threads import one_blas_thread

PART_BITS = batching.PART_BITS
_MAX_BYTES = 64 << 20          # the signatures' own memory (keys, payloads, traced cells)
_MAX_DEAD = (4096, 64 << 20)    # parameters gone (count, bytes) that the table may still hold


_new = object.__new__


class _Signatures:
    """Process-wide interning of signature keys (shared by all scopes, so a warm process looks
    keys up instead of inferring). A scope that starts once the table's own memory has grown
    past a bound in bytes (``footprint``: a program that mints a signature per scope, an
    annealed constant or a new trace, grows it), or once the parameters that the program has
    dropped but the table still holds pass one (a notebook that re-creates its model would
    otherwise keep every model's weights), starts a new table. Scopes still open keep the one
    they started with (its ``generation`` keys their plans), so the bound holds while others
    record."""

    def __init__(self):
        self.lock = threading.Lock()
        self.generations = itertools.count()
        self.reset()

    def reset(self):
        PLANS.clear()  # compiled programs name signatures by id
        self.table = batching.SignatureTable()
        self.table.generation = next(self.generations)
        self.entries: dict = {}
        self.fusions: dict = {}  # (producer sig, consumer sig) -> (fused entry, producer's slots) or None
        self.watched: dict = {}  # parameter id -> weak reference to its handle
        self.dead = [0, 0]       # parameters the table holds that are gone: count, bytes
        self.bytes = 0           # the signatures' own memory (``footprint``)

    def watch(self, param):
        """Count ``param``'s bytes as dead once its handle is gone (called when a signature
        that holds it is interned)."""
        pid = -param._ref
        if pid not in self.watched:
            self.watched[pid] = weakref.ref(param, functools.partial(self._gone, pid, param._value.nbytes))

    def _gone(self, pid, nbytes, _, names=PARAM_NAMES):  # bound here: it may run at exit
        if self.watched.pop(pid, None) is not None:
            self.dead[0] += 1
            self.dead[1] += nbytes
        names.pop(pid, None)

    def enter(self):
        """(table, entries, fusions) for a new scope: the current ones, or new ones past a bound."""
        with self.lock:
            if self.bytes > _MAX_BYTES or self.dead[0] > _MAX_DEAD[0] or self.dead[1] > _MAX_DEAD[1]:
                self.reset()
            return self.table, self.entries, self.fusions


SIGNATURES = _Signatures()


class _Refused(dict):
    """The signature entries of a failed scope: every lookup raises its ``refusal()``, so that
    recording into a scope whose flush failed (while its block runs on) stops at the call."""

    __slots__ = ("scope",)

    def __init__(self, scope):
        super().__init__()
        self.scope = scope

    def _refuse(self, *_):
        raise self.scope.refusal()

    __getitem__ = get = __contains__ = __setitem__ = _refuse


class Payload:
    """What the executor needs to run a batch of one signature."""

    __slots__ = ("op", "layout", "attrs", "out_cls", "part_cls", "kind", "label", "plan", "form")

    def __init__(self, op, layout, attrs, out_cls, part_cls, kind, label, plan=None):
        self.op, self.layout, self.attrs = op, layout, attrs
        self.out_cls, self.part_cls, self.kind, self.label = out_cls, part_cls, kind, label
        self.plan = plan  # a cell's traced body
        self.form = None  # what the executor compiles from it alone, on its first batch (executor.Form)


INPUT = "input"
EAGER = []  # [lazyarray.ops.eager], registered by that module (it imports this one)


def current():
    """The innermost active scope of this context (thread, asyncio task, greenlet), or None
    (eager mode)."""
    return SCOPE.get()


def record(fn, *args, scheduler="agenda") -> "batching.GraphView":
    """The whole graph that ``fn(*args)`` records, without executing it (forcing inside ``fn``
    still runs what was recorded before it; those nodes are part of the graph too)."""
    scope = Scope(scheduler=scheduler)
    try:
        scope.__enter__()
        fn(*args)
        if scope.failed is not None:    # a forced value's flush failed and fn went on
            raise scope.refusal()
        view = scope.graph.view()
        scope.discard()
        return view
    finally:
        scope.end()


class Scope:
    """Returned by ``la.batching()``; see its docstring."""

    # what a recording stub reads per call: slots, which the compiled stubs read at their offsets
    # (``lazyarray._recorders``); everything else lives in the instance dict
    __slots__ = ("_sig", "_depth", "_ins", "_handles", "entries", "_concrete", "done", "fusions", "__dict__",
                 "__weakref__")
    tracing = None   # the cell whose body this scope traces (it never executes)
    first_key = 0    # tracing: the integer argument position of the body's first dropout key
    keys = 0         # tracing: dropout keys the body took (each call draws as many)
    sealed = False   # tracing: arguments are placed, any other input is a captured array
    refused = None   # tracing: the first CellError raised while the body ran (it may catch it)
    int_bounds: dict  # tracing: integer argument position -> size of the axis it indexes

    def __init__(self, scheduler="agenda", backend=None, memplan=False, strict=None):
        self.scheduler = batching.resolve(scheduler)
        self.strict = bool(os.environ.get("LAZYARRAY_STRICT")) if strict is None else bool(strict)
        if memplan not in (True, False):
            raise TypeError(f"la.batching(memplan=...) takes True or False, not {memplan!r}")
        self.memplan = bool(memplan)
        self.backend = get_backend(backend)
        self._plan_key = (scheduler if isinstance(scheduler, str) else self.scheduler, self.memplan,
                          self.backend.name, None)   # and the signature table's generation
        self.stats = Stats()
        self.failed = None
        self._active = self._entered = False
        self._hook = None

    # -- scope protocol -----------------------------------------------------------------------
    # Entering changes three things: the context's current scope, the scope's own state and
    # the failure of the scope. Each change is undone by ``_release`` (idempotent, so running
    # it again repairs one that an interrupt cut short), which ``__exit__`` and ``discard``
    # run in ``finally`` clauses, and which the exit hook runs where ``__exit__`` never got to
    # run its first line (an interrupt as it was called): see ``_Exit``.
    def __enter__(self):
        if self._entered:
            raise ScopeError("a batching scope can be entered once; create a new la.batching()")
        self._entered = True
        try:
            self.table, self.entries, self.fusions = SIGNATURES.enter()
            self._plan_key = self._plan_key[:3] + (self.table.generation,)
            self.graph = batching.Graph(self.table)
            self._sig, self._depth, self._ins = self.graph.sig, self.graph.depth, self.graph.ins
            self.inputs: list = []
            self._concrete: dict = {}  # id -> (concrete LazyArray used here, its input node ref)
            self._revived: list = []    # (handle, its Detached, its ref): fused-away values made nodes again
            self.int_bounds = {}
            self._constants: dict = {}  # tracing: id -> (value, op) computed from parameters and constants only
            self.done = 0
            self.ins_done = 0
            self.executor = Executor(self.backend, self.stats)
            self.memo_key = object()    # cell recorders' memos hold it: new per scope (see Cell.specialise)
            self._handles: list = []    # every future made here (see ``_finish``)
            self.seeds: list = []       # references of losses whose backward() the next flush runs
            self.leaves: dict = {}      # reference of an input that asked for its gradient -> its Leaf
            self.detached: list = []    # why values entered as data that a gradient cannot pass
            self._tasks = None      # while ``map`` runs: its ``_Tasks``
            self._thread = threading.get_ident()
            self._outer = SCOPE.get()
            self._resumed = time.perf_counter()
            self._active = True
            collector.hold(self)
            SCOPE.set(self)     # last: nothing after it but the return can be interrupted
        except BaseException as error:
            self._active = False
            self._fail(error)
            self._release()
            raise
        return self

    def _release(self, hold=False):
        """Leave the context's chain of scopes. Out of order (two generators interleaving their
        scopes in one context) the scope is linked out where it is, so nothing is left behind.
        ``hold``: the collector's setting stays held (see ``_exit``)."""
        if not hold:
            collector.release(self)
        current = SCOPE.get()
        if current is self:
            SCOPE.set(self._outer)
            return
        while current is not None:
            if current._outer is self:
                current._outer = self._outer
                return
            current = current._outer

    def end(self):
        """Fail and leave the scope if it is still active: what code that entered it by hand
        runs in a ``finally`` (the error in flight, if any, is the failure its futures name).
        Idempotent, as ``_release`` is."""
        if self._active:
            self._active = False
            try:
                self._fail(sys.exc_info()[1] or ScopeError("the scope was left without exiting it"))
            finally:
                self._release()
        else:
            self._release()

    def discard(self) -> "batching.GraphView":
        """Leave the scope without running anything; returns the recorded graph (for
        schedulers that learn from it). Futures of the scope then raise ScopeError."""
        try:
            in_order = SCOPE.get() is self
            view = self.graph.view(self.done, self.ins_done)
        finally:
            self._active = False
            try:
                self._fail(ScopeError("the scope was discarded after recording"))
            finally:
                self._release()
        if not in_order:
            raise ScopeError("batching scopes must exit in the reverse order of entry")
        return view

    def _exit(self, exc_type, exc, tb):
        self._hook = None   # ran: the hook has nothing to do (and holds no cycle)
        if not self._active:
            return False
        # The collector's setting comes back last: restored before ``_finish`` let go of the
        # handles, the next allocation ran a young collection over every one of them (op-level
        # BiLSTM, 64 sentences: 11.5 ms of collection per scope, 0.2 after; TreeLSTM 6.4, 1.5-3.7).
        try:
            try:
                if SCOPE.get() is not self:
                    raise ScopeError("batching scopes must exit in the reverse order of entry")
                if exc_type is None:
                    if self.failed is not None:     # a forced value's flush failed and the block went on
                        raise self.refusal()
                    self._release(hold=True)  # before running: a flush may record no more
                    self._flush()
            except BaseException as error:
                self._fail(error)
                raise
            finally:
                self._active = False
                self._release(hold=True)
            if exc_type is not None:
                self._fail(exc)
                return False
            self.stats.nodes = len(self.graph)
            self._finish()
        finally:
            try:
                collector.release(self)
            finally:
                collector.release(self)     # again, where an interrupt cut the first short
        if os.environ.get("LAZYARRAY_EXPLAIN"):
            print(self.explain())
        return False

    def _finish(self):
        """Hand each future still held outside the scope its own value (a copy: a view of its
        arena would keep the whole arena), then let go of the graph and the arenas: a kept
        loss holds its four bytes, not every intermediate of its scope. Futures nobody holds
        any more (the list's reference is their last) are skipped: most of them."""
        handles, self._handles = self._handles, []
        held = [h for h in handles if _refcount(h) > 3]     # the list, the loop variable, the argument
        del handles
        mine = [h for h in held if h._scope is self]
        # located all at once: one by one, each cost ~1 µs (TreeGRU at op level keeps 5k losses
        # alive in its recursion's closure until the collector runs)
        computed = [h for h in mine if h._value is None]
        for h, value in zip(computed, self.executor.copies([h._ref for h in computed])):
            h._value = value
        leaves, carried = self.leaves, None
        for h in mine:
            h._value = value = _own(h._value)
            leaf = leaves.get(h._ref) if leaves else None   # the Leaf of la.array(x, grad=True)
            if leaf.__class__ is not Leaf:
                leaf = None
            if leaf is None and value.dtype.kind in "fc":
                if carried is None:
                    carried = GRAD.get() and self._carries()
                leaf = FINISHED if carried else None
            h._scope = leaf
        for h in held:
            s = h._scope
            if s.__class__ is fusion.Detached and s.scope is self:
                s.revive(h)
                h._value = _own(h._value)
        self.graph = self.executor = None
        self.inputs, self._concrete, self.leaves = [], {}, {}

    def _carries(self) -> bool:
        """Whether this scope computed with inputs or parameters that ask for a gradient."""
        if self.leaves:
            return True
        payloads = self.table.payload
        for sig in set(self._sig):
            for ref in parameters_of(payloads[sig]):
                leaf = leaf_of(-ref)
                if leaf is not None and (leaf.base or leaf).requires_grad:
                    return True
        return False

    def handle(self, ref, cls) -> LazyArray:
        """A future of node reference ``ref``, kept in the scope's list (``_finish``)."""
        h = LazyArray(self, ref, cls)
        self._handles.append(h)
        return h

    def _unwound(self, hook):
        """The exit hook's callback: the ``with`` statement let go of its ``__exit__`` without
        it having run (an interrupt as it was called), so the scope is ended here."""
        if hook is self._hook:
            self._hook = None
            while self._active:     # a callback's exceptions are lost: an interrupt here retries
                try:
                    self._fail(ScopeError("the scope was interrupted as it exited"))
                    self._release()
                    self._active = False
                except BaseException:
                    continue

    def _fail(self, error):
        """Discard what the scope holds; its futures then raise ScopeError. A scope that fails
        while its block still runs (a forced value's flush raised and the caller caught it)
        refuses to record anything more: every signature lookup raises ScopeError, and so
        does leaving it."""
        if self.failed is None:     # the first error is the one its futures name
            self.failed = error
        self.entries = _Refused(self)
        self.memo_key = object()    # a recorder's memo must not bypass the refusal
        self.graph = self.executor = None
        self.inputs, self._concrete, self._handles = [], {}, []

    def refusal(self) -> ScopeError:
        """The error of using this scope after it failed."""
        error = ScopeError(f"this batching scope failed with {type(self.failed).__name__}: {self.failed}; "
                           "nothing more can be recorded or run in it: leave it and use a new la.batching()")
        error.__cause__ = self.failed
        return error

    def explain(self) -> str:
        """Which signatures were batched how: batches and batch sizes per signature."""
        return self.stats.explain()

    # -- forcing ------------------------------------------------------------------------------
    def check_thread(self):
        """Refuse to touch an active scope from another thread: it may be recording right now."""
        if threading.get_ident() != self._thread:
            raise ScopeError("this future belongs to a scope that is still recording in another "
                             "thread; use it there, or here once that scope has exited")

    def value(self, handle: LazyArray):
        if self.tracing is not None:
            raise CellError(f"cell {self.tracing}: its body forces a value (float/int/bool/asnumpy); "
                            "Python control flow on values cannot be part of a static cell")
        if self.failed is not None:
            raise ScopeError(f"this value belongs to a batching scope that failed with "
                             f"{type(self.failed).__name__}: {self.failed}") from self.failed
        node = handle._ref >> PART_BITS
        if node >= self.done:
            if not self._active:
                raise ScopeError("this future was never executed (its scope is not active)")
            tasks = self._tasks
            index = None if tasks is None else tasks.index.get(greenlet.getcurrent())
            if index is not None:
                tasks.wait(index)   # the scope flushes once every task waits or is done
                if self.failed is not None:
                    raise self.refusal()
            else:
                if self.strict:
                    raise ScopeError(f"strict scope: forcing a value at {_user_line()} would flush what the "
                                     f"scope recorded ({len(self.graph) - self.done} nodes): force it after the "
                                     "scope, or run value-dependent code with scope.map")
                self.flush()
        value = self.executor.value(handle._ref)
        if self.backend.name != "numpy":
            self.stats.transfers += 1
            self.stats.transfer_bytes += int(value.nbytes)
        return value

    def flush(self):
        """Run what was recorded so far (and a pending backward) now; recording goes on."""
        self.check_thread()
        self.stats.flushes += 1
        try:
            self._flush()
        except BaseException as error:
            self._fail(error)
            raise

    def _flush(self):
        with one_blas_thread():
            self._run_flush()

    def _run_flush(self):
        now = time.perf_counter()
        self.stats.times["record"] += now - self._resumed
        if len(self.graph) > self.done:
            view = self.graph.view(self.done, self.ins_done)
            key = PLANS.key(self._plan_key, view)
            cached = PLANS.get(key)
            program = None
            if cached is None:
                self.stats.cache_misses += 1
                batches = self.scheduler.schedule(view)
                if type(self.scheduler) not in batching.TESTED_SCHEDULERS:
                    try:    # a wrong schedule would read values not computed yet
                        batching.check_schedule(view, batches)
                    except batching.InvalidSchedule as error:
                        raise batching.InvalidSchedule(f"scheduler {self.scheduler!r}: {error}") from None
                    batches = [np.asarray(b, dtype=np.int64) for b in batches]     # lists work too
                scheduled = time.perf_counter()
                layout = memory.plan(view, batches, self.table.payload) if self.memplan else None
            else:
                self.stats.cache_hits += 1
                batches, layout, program = cached
                scheduled = time.perf_counter()
            self.stats.times["schedule"] += scheduled - now
            self.stats.times["plan"] += time.perf_counter() - scheduled
            if layout is not None:
                batches = layout.batches
                self.stats.aligned_operands += layout.aligned
                self.stats.planned_operands += layout.operands
            replay = program is not None
            if not replay:
                program = self.executor.compile(view, batches, self.table.payload,
                                                None if layout is None else layout.rows)
                PLANS.put(key, (batches, layout, program if program.replayable else None))
            for plan in program.plans:
                rebound = plan.bindings and bindings.stale(plan.bindings)
                if rebound:
                    raise CellError(f"cell {plan.name}: {rebound[1]} was rebound to another parameter after calls "
                                    "of the cell were recorded in this scope, which would run the old weights; "
                                    "rebind between scopes, or update the parameter in place")
            self.executor.saving = bool(self.seeds)     # cell bodies keep their values for it
            self.executor.run(program, view, self.inputs, replay)
            self.stats.add_segment(view, batches, self.table)
            self.done = len(self.graph)
            self.ins_done = len(self.graph.ins)
            self.inputs = []
            self._revived.clear()   # nothing before ``done`` is rolled back
        if self.seeds:
            started = time.perf_counter()
            seeds, self.seeds = self.seeds, []
            try:
                inputs, unreached = self._reach(seeds)
                Backward(self.executor).run(seeds, inputs, unreached)
            finally:
                self.executor.saved.clear()     # values kept for the backward: only until it ran
                self.executor.saving = False
            self.stats.times["backward"] += time.perf_counter() - started
        self._resumed = time.perf_counter()

    def _reach(self, seeds):
        """(inputs asking for a gradient that the losses ``seeds`` depend on, leaves of the
        parameters that only nodes they do not depend on read): as eagerly, those get no
        gradient (None), not zeros from a batch shared with nodes that reach a loss."""
        runs = self.executor.runs
        view = runs[0][1] if len(runs) == 1 else self.graph.view()     # the whole graph
        reached = view.ancestors(np.array(seeds, dtype=np.int64) >> PART_BITS)
        inputs = [(ref, leaf) for ref, leaf in self.leaves.items() if reached[ref >> PART_BITS]]
        n = len(self.table)     # once: other threads' scopes may intern signatures meanwhile
        used = np.bincount(view.sig, minlength=n)
        hit = np.bincount(view.sig[reached], minlength=n)
        missed = np.flatnonzero((used > 0) & (hit == 0))
        if not len(missed):
            return inputs, ()
        payloads = self.table.payload
        wanted = {ref for sig in np.flatnonzero(hit).tolist() for ref in parameters_of(payloads[sig])}
        unreached = {ref for sig in missed.tolist() for ref in parameters_of(payloads[sig])} - wanted
        return inputs, [leaf for leaf in map(leaf_of, (-ref for ref in unreached)) if leaf is not None]

    # -- tasks ---------------------------------------------------------------------------------
    def map(self, fn, instances) -> list:
        """``[fn(x) for x in instances]``, each call a task (a greenlet): a task that forces a
        value (``float``, ``int``, ``bool``, ``.item()``, ``np.asarray``) waits instead of
        flushing, and once every task waits or is done the scope flushes once, all tasks' ops
        batched together, and resumes them. Per-instance code whose next step depends on what
        it just computed (a parser, beam search) then batches across instances as written; code
        that forces nothing runs as it would in a loop. Results come back in order. A task that
        raises ends the others (their ``finally`` blocks run) and the error, which names the
        instance's index (``error.instance``), fails the scope as any error in it does."""
        if not self._active or self.failed is not None:
            raise self.refusal() if self.failed is not None else ScopeError("scope.map needs an active scope")
        self.check_thread()
        if self._tasks is not None:
            raise ScopeError("scope.map inside a task of the same scope: call it from the scope's block")
        tasks = []
        for x in instances:
            task = greenlet.greenlet(functools.partial(fn, x))
            task.gr_context = contextvars.copy_context()     # this scope current, each task its own
            tasks.append(task)
        self._tasks = state = _Tasks(tasks)
        results = [None] * len(tasks)
        try:
            while state.queue:
                while state.queue:
                    i = state.queue.popleft()
                    state.running = i
                    try:    # returns when a task ends, or when the last one of the round waits
                        out = tasks[i].switch()
                    except BaseException as error:
                        error.instance = state.running
                        error.add_note(f"raised by scope.map's task for instance {state.running}")
                        raise
                    if tasks[state.running].dead:
                        results[state.running] = out
                if state.waiting:
                    self.flush()
                    state.queue.extend(state.waiting)
                    state.waiting.clear()
        finally:
            self._tasks = None
            for task in tasks:      # after an error: the others' finally blocks run, nothing waits on
                if not task.dead:
                    task.throw(greenlet.GreenletExit)
        return results

    # -- gradients ----------------------------------------------------------------------------
    def backward(self, handle: LazyArray):
        """Record ``handle.backward()``: it runs at the next flush, batched like the forward."""
        if self.tracing is not None:
            raise CellError(f"cell {self.tracing}: its body calls backward(); call it on the cell's result")
        if self.failed is not None:
            raise self.refusal()
        if not self._active:
            raise ScopeError("backward() of a future of a finished scope: the values a backward needs are gone "
                             "when the scope exits; call loss.backward() inside the `with la.batching():` block")
        self.check_thread()
        if self.detached:
            raise ScopeError(f"no gradient can flow through {self.detached[0]}")
        for leaf in self.leaves.values():
            if leaf.__class__ is Upstream:
                leaf.check()
        payloads = self.table.payload
        for sig in set(self._sig):      # before anything runs: nothing half-updated
            missing = rule_missing(payloads[sig])
            if missing is not None:
                raise NotImplementedError(f"backward(): la.{missing.name} has no gradient rule, and this scope "
                                          "computed with it")
        self.seeds.append(handle._ref)

    def ask_grad(self, handle: LazyArray, leaf):
        """``la.array(x, grad=True)``: the input's gradient goes to ``leaf`` at a backward."""
        self.leaves[handle._ref] = leaf

    # -- recording ----------------------------------------------------------------------------
    def record(self, op: OpDef, operands, attrs):
        """The generic recording path: any operator, any operand kinds."""
        mark = (len(self._sig), len(self._ins), len(self.inputs))
        try:
            entry, refs, aux = self.entry(op, operands, attrs)
            if entry is None:   # nothing varies per node: a constant, computed now
                if op.alias is not None:
                    derived = _derived(op, operands, attrs)
                    if derived is not None:
                        return derived
                result = EAGER[0](op, operands, attrs)
                if self.tracing is not None:
                    if result.__class__ is LazyArray and _constants_only(operands):
                        return self._trace_constant(result._value)
                    self._constants[id(result)] = (result, op.name)     # named if the body computes with it
                return result
            if aux and entry[2] is not None:
                self._check_bounds(op, aux, entry[2])
        except BaseException:
            self._rollback(mark)
            raise
        if len(refs) == 1 and op.name in CONSUMERS:
            handle = next((a for a in operands if a.__class__ is LazyArray and a._scope is self
                           and a._ref == refs[0]), None)
            fused = None if handle is None else self.fuse(entry, handle, operands, aux)
            if fused is not None:
                return fused
        return self.append(entry, refs, aux)

    def entry(self, op: OpDef, operands, attrs):
        """(entry, refs, aux) of a call: its interned signature (None when no operand varies per
        node), node inputs and integer data; operands that are arrays become input nodes."""
        key = [op]
        refs: list[int] = []
        aux: list[int] = []
        for position, ((name, kind), a) in enumerate(zip(op.operands, operands)):
            if kind == ARRAY:
                if self.sealed and _captured(a):
                    a = self._trace_constant(a)
                    operands = [*operands[:position], a, *operands[position + 1:]]
                key.append(self._operand(a, refs, scalars_ok=True))
            elif kind == ARRAYS:
                if isinstance(a, LazyArray) or not hasattr(a, "__len__"):
                    raise TypeError(f"la.{op.name}: {name} must be a non-empty sequence of arrays")
                if not len(a):      # as numpy and eager mode say it
                    raise ShapeError(f"la.{op.name} with operand shapes []: need at least one array to {op.name}")
                if self.sealed and any(isinstance(x, _SCALARS) or _captured(x) for x in a):
                    a = self._trace_items(a)
                    operands = [*operands[:position], a, *operands[position + 1:]]
                key.append(tuple(self._operand(x, refs, scalars_ok=False) for x in a))
            elif kind == INDEX:
                key.append(_index_key(op, a, aux))
            else:
                key.append(_hashable(a))
        if not refs and not aux:
            return None, refs, aux
        key.extend(_hashable(v) for v in attrs.values())
        key = tuple(key)
        entry = self.entries.get(key)
        if entry is None:
            entry = self._intern(key, op, operands, attrs, len(refs), len(aux))
        return entry, refs, aux

    def fuse(self, entry, handle, operands, aux):
        """The call of ``entry`` fused with the op that made ``handle`` (its only per-node operand)
        into one node, or None where no fusion applies (see ``lazyarray.fusion``). Runs for
        every ``W @ x + b``: handles are filled in, not constructed (~0.3 µs of ~0.9)."""
        graph_sig = self._sig
        last = len(graph_sig) - 1
        if handle._ref != last << PART_BITS or last < self.done:
            return None
        producer = graph_sig[last]
        key = (producer, entry[0])
        fusions = self.fusions
        fused = fusions.get(key, fusions)
        if fused is fusions:
            position = next(i for i, a in enumerate(operands) if a is handle)
            fused = fusion.fused_entry(self, producer, entry, operands, position)
            if fused is not None:  # with the width of the producer's input slots
                fused = fused, self.table.nref[producer] + self.table.naux[producer]
            fusions[key] = fused
        if fused is None:
            return None
        fused, width = fused
        detached = _new(fusion.Detached)
        detached.scope, detached.entry, detached.offset = self, (producer, handle._cls, None, 0), len(self._ins) - width
        handle._scope = detached
        graph_sig[last] = fused[0]
        if aux:
            self._ins.extend(aux)
        return future(self, handle._ref, fused[1])

    def _check_bounds(self, op, aux, bound):
        for v in aux:
            self._check_bound(f"la.{op.name}: index", v, bound)

    def _check_bound(self, what, v, bound):
        """Indices must lie in the indexed axis; a traced cell's integer arguments (sentinels)
        are checked per call against the tightest axis they index."""
        if v <= IndexArg.sentinel_base and self.tracing is not None:   # sentinels exist only in traces
            position = IndexArg.sentinel_base - v
            self.int_bounds[position] = min(self.int_bounds.get(position, bound), bound)
        elif not -bound <= v < bound:
            raise IndexError(f"{what} {v} is out of range for an axis of size {bound}")

    def _rollback(self, mark):
        """Forget input nodes made for the operands of a call that then failed."""
        nodes, slots, inputs = mark
        del self._sig[nodes:], self._depth[nodes:], self._ins[slots:], self.inputs[inputs:]
        self._concrete = {k: v for k, v in self._concrete.items() if v[1] >> PART_BITS < nodes}
        revived = self._revived     # fused-away values the call's operands revived: fused away again
        while revived and revived[-1][0]._scope is self and revived[-1][0]._ref >> PART_BITS >= nodes:
            handle, detached, ref = revived.pop()
            handle._scope, handle._ref = detached, ref

    def _operand(self, a, refs, scalars_ok):
        """Key part of an ARRAY operand; per-node values go to ``refs``."""
        if a.__class__ is LazyArray:
            if a._scope.__class__ is fusion.Detached:
                if a._scope.scope is self:  # undone if the call is refused (``_rollback``)
                    self._revived.append((a, a._scope, a._ref))
                a._scope.revive(a)
            if a._scope is self:
                refs.append(a._ref)
                return a._cls
            if a._ref < 0:
                return a._ref
            if self.tracing is not None:
                made = self._constants.get(id(a))
                if made is not None and made[0] is a:
                    raise CellError(f"cell {self.tracing}: its body computes la.{made[1]} of parameters and "
                                    "constants only (e.g. W.T, W[0:2], la.concatenate([W1, W2])): traced, its value "
                                    "would be frozen and miss parameter updates; compute it outside the body and "
                                    "make it a la.parameter, or pass it as an argument")
                raise CellError(f"cell {self.tracing}: its body uses an array that is neither an "
                                "argument nor a parameter; pass it as an argument")
            known = self._concrete.get(id(a))
            if known is None:   # copied as numpy operands are: read as of its first use here
                node = self.input(np.array(a.asnumpy()))
                known = self._concrete[id(a)] = (a, node._ref, node._cls)
                s = a._scope
                if s.__class__ is Leaf:
                    if s.requires_grad:     # la.array(x, grad=True) made before the scope
                        self.leaves[node._ref] = s
                elif s.__class__ is Node or s.__class__ is Part:
                    self.leaves[node._ref] = Upstream(a)
                elif s is FINISHED or s.__class__ is Scope and a.dtype.kind in "fc":
                    self.detached.append(_detached_why(s))
            refs.append(known[1])
            return known[2]
        elif a.__class__ is IndexArg:
            a._refuse()                 # arithmetic on a traced cell's integer argument
        elif scalars_ok and isinstance(a, (int, float, complex, np.generic)):
            c = a.__class__     # a nonzero float: its value; zeros by sign, NaNs alike
            return (c, a) if c is int or c is float and a and a == a else scalar_key(a)
        else:   # a copy: the op reads it when the scope runs, after the caller may reuse it
            a = a.copy() if self.backend.is_device_array(a) else np.array(a)
        refs.append(self.input(a)._ref)
        return class_id(a.shape, a.dtype)

    def input(self, value) -> LazyArray:
        """A per-instance data node: its value is stacked with the other inputs of its class."""
        if self.sealed:
            return self._trace_constant(value)
        cls = class_id(value.shape, value.dtype)
        key = (INPUT, cls)
        entry = self.entries.get(key)
        if entry is None:
            label = f"input({_describe_cls(cls)})"
            sig = self.table.intern(key, 0, 1, False, label, Payload(None, (), {}, cls, None, INPUT, label))
            entry = self.entries[key] = (sig, cls, None, 0)
        inputs = self.inputs
        inputs.append(value)
        graph_sig = self._sig       # self.append written out: one node per input is common
        nid = len(graph_sig)
        graph_sig.append(entry[0])
        self._depth.append(0)
        self._ins.append(len(inputs) - 1)
        return future(self, nid << PART_BITS, cls)

    def _trace_constant(self, value) -> LazyArray:
        """An array a traced body makes (``np.zeros(H)``, ``la.array(...)``) or reads from
        elsewhere: a constant of the trace, as every value the body reads besides its arguments
        and parameters is (the body runs once per signature): a read-only parameter without a
        gradient, one operand shared by every call. Eagerly the body computes the same."""
        value = value.copy() if self.backend.is_device_array(value) else np.array(value)
        value.flags.writeable = False
        return new_parameter(value, f"constant{value.shape}", requires_grad=False)

    def _trace_items(self, items) -> list:
        """A join's items in a traced body with its scalars (``la.full``'s shared constants) and
        arrays made constants of the trace: elsewhere in a scope they are input nodes."""
        from . import full
        return [full((), x) if isinstance(x, _SCALARS) and x.__class__ is not LazyArray
                else self._trace_constant(x) if _captured(x) else x for x in items]

    def append(self, entry, refs, aux):
        """Add a node with input references ``refs`` and integer data ``aux``."""
        sig, out_cls, nout = entry[0], entry[1], entry[3]
        nid = len(self._sig)
        depth = self._depth
        d = 0
        for r in refs:
            dr = depth[r >> PART_BITS] + 1
            if dr > d:
                d = dr
        self._sig.append(sig)
        depth.append(d)
        ins = self._ins
        ins.extend(refs)
        if aux:
            ins.extend(aux)
        ref = nid << PART_BITS
        if nout:
            return parts(self, ref, out_cls)
        return future(self, ref, out_cls)

    def _intern(self, key, op, operands, attrs, nref, naux):
        """First sight of a key: validate, infer the result, describe, and intern."""
        layout, infer_args, slot = [], [], iter(range(nref))
        all_attrs = dict(attrs)
        for (name, kind), a in zip(op.operands, operands):
            if kind == ARRAY:
                spec, dummy = self._spec(a, slot)
                layout.append(spec)
                infer_args.append(dummy)
            elif kind == ARRAYS:
                specs = [self._spec(x, slot, scalars_ok=False) for x in a]
                layout.append(("list", [s for s, _ in specs]))
                infer_args.append([d for _, d in specs])
            elif kind == INDEX:
                shape = np.shape(a)
                layout.append(("index", shape))
                infer_args.append(np.zeros(shape, dtype=np.int64) if shape else 0)
            else:
                all_attrs[name] = a
                infer_args.append(a)
        described = _describe_call(op, layout, all_attrs)
        try:
            result = op.infer(*infer_args, **attrs)
        except (ValueError, TypeError) as error:   # numpy's AxisError too: a shape error
            raise ShapeError(f"{described}: {error}") from None
        except IndexError as error:                 # as numpy and eager mode raise it
            raise IndexError(f"{described}: {error}") from None
        bound = op.bound(*infer_args, **attrs) if op.bound else None
        if isinstance(result, list):
            _check_parts(described, len(result))
            part_cls = tuple(class_id(s, d) for s, d in result)
            stacked_shape = (len(result),) + tuple(result[0][0])
            out_cls = class_id(stacked_shape, result[0][1])
            nout = len(result)
        else:
            out_cls = class_id(*result)
            part_cls, nout = None, 0
        attrs_for_kernel = {k: _real(v) for k, v in all_attrs.items()}
        payload = Payload(op, layout, attrs_for_kernel, out_cls, part_cls, "op", described)
        size = footprint(key, payload)
        with SIGNATURES.lock:
            SIGNATURES.bytes += size
            sig = self.table.intern(key, nref, naux, op.heavy, described, payload)
            entry = (sig, part_cls if nout else out_cls, bound, nout)
            self.entries[key] = entry
        return entry

    def record_cell(self, cell, args):
        """One node for a cell call; the body is traced on the first call of a signature."""
        key = [cell.key]
        refs: list[int] = []
        aux: list[int] = []
        mark = None  # taken before the first operand that may add input nodes
        kinds = []      # per argument, for the cell's generated recorder
        try:
            for a in args:
                c = a.__class__
                if c is LazyArray and a._scope is self:
                    key.append(a._cls)
                    refs.append(a._ref)
                    kinds.append("future")
                    continue
                kind = _ARG_KINDS.get(c) or _arg_kind(c)
                kinds.append("int" if c is int or c in NUMPY_INTS else "param" if c is LazyArray and a._ref < 0
                             else "ndarray" if c is np.ndarray else "concrete" if c is LazyArray
                             else kind if kind == "static"
                             else "const" if c is float or c is bool or c is complex or c in NUMPY_SCALARS else "other")
                if kind == "int":
                    key.append("int")
                    aux.append(a.sentinel if c is IndexArg else _plain_index(f"cell {cell.name}: integer argument", int(a)))
                elif kind == "static":
                    key.append(static_key(a))
                else:
                    mark = mark or (len(self._sig), len(self._ins), len(self.inputs))
                    key.append(self._operand(a, refs, scalars_ok=True))
            if not refs and not aux:        # parameters and constants only: nothing to batch
                return cell.fn(*args)       # across calls, so the body records op by op
            if cell.watches():
                key.append(cell.environment())
            key = tuple(key)
            try:
                entry = self.entries.get(key)
            except TypeError:
                raise CellError(f"cell {cell.name}: an argument is neither an array nor hashable; pass "
                                "arrays, numbers, or objects hashed by identity") from None
            if entry is None:
                entry = self._intern_cell(key, cell, args, len(refs))
            elif entry[4] is not None:
                rebound = bindings.stale(entry[4])
                if rebound is not None:     # trace anew, under a new key for the object
                    if not rekey(rebound[0], cell.held):
                        raise CellError(f"cell {cell.name}: {rebound[1]} was rebound to another parameter "
                                        "after the body was traced, and the object cannot be keyed anew (it "
                                        "has no weak references); update the parameter in place instead")
                    if mark:
                        self._rollback(mark)
                    return self.record_cell(cell, args)
            if aux and entry[2]:
                for v, bound in zip(aux, entry[2]):
                    if bound is not None:
                        self._check_bound(f"cell {cell.name}: integer argument", v, bound)
        except BaseException:
            if mark:
                self._rollback(mark)
            raise
        structure = entry[6]
        if entry[1] == ():  # nothing computed: as eagerly, the call gives None or the parameters returned
            return None if structure == "none" else rebuild(structure, ())
        if "other" not in kinds and (structure is None or structure == "tuple"):
            cell.specialise(args, kinds, entry[3])
        if entry[5]:
            aux.extend(call_keys(entry[5]))
        node = self.append(entry, refs, aux)
        return node if structure is None or structure == "tuple" else rebuild(structure, node)

    def _intern_cell(self, key, cell, args, nref):
        slot, position = iter(range(nref)), iter(range(len(args)))
        layout = []
        for a in args:
            kind = "array" if a.__class__ is LazyArray else _ARG_KINDS.get(a.__class__) or _arg_kind(a.__class__)
            if kind == "int":
                layout.append(("int", next(position)))
            elif kind == "static":
                layout.append(("static", a))
            else:
                spec = self._spec(a, slot)[0]
                layout.append(spec + (a,) if spec[0] == "shared" else spec)
        plan = trace(cell, layout)
        described = f"cell {cell.name}({', '.join(_describe_spec(s) for s in layout)})"
        # the plan holds what the body computes with; the handles and bundles it was traced
        # with would keep a dropped model alive in the table
        layout = [s[:3] if s[0] == "shared" else ("static", None) if s[0] == "static" else s for s in layout]
        multi = isinstance(plan.out_classes, tuple)
        if multi:
            _check_parts(f"cell {cell.name}", len(plan.out_classes))
        payload = Payload(None, layout, {}, plan.out_classes, plan.out_classes if multi else None,
                          "cell", described, plan)
        naux = sum(1 for s in layout if s[0] == "int") + plan.keys
        size = footprint(key, payload)
        with SIGNATURES.lock:
            SIGNATURES.bytes += size
            sig = self.table.intern(key, nref, naux, True, described, payload)
            entry = (sig, plan.out_classes, plan.int_bounds, len(plan.out_classes) if multi else 0,
                     plan.bindings or None, plan.keys, plan.structure)
            self.entries[key] = entry
        return entry

    def _spec(self, a, slot, scalars_ok=True):
        """(layout spec, inference dummy) of an ARRAY operand already keyed by ``_operand``
        with the same ``scalars_ok``: a scalar item of a join is an input node there, so a
        stacked slot here (as a constant, the signature read the wrong slots)."""
        from ops_registry.kernels import dummy
        if a.__class__ is LazyArray and a._ref < 0 and a._scope is not self:
            if not self.backend.is_device_array(a._value):
                raise TypeError(f"parameter {PARAM_NAMES.get(-a._ref)} holds a {type(a._value).__module__} "
                                f"array but this scope runs on the {self.backend.name} backend: create it "
                                f"there or move it with .to({self.backend.name!r})")
            SIGNATURES.watch(a)
            return ("shared", a._value, a._ref), dummy(a.shape, a.dtype)
        if scalars_ok and isinstance(a, (int, float, complex, np.generic)):
            return ("const", a), a
        shape, dtype = _shape_dtype(a)
        return ("stacked", next(slot), class_id(shape, dtype)), dummy(shape, dtype)


class _Tasks:
    """The tasks of a ``Scope.map`` round by round: a task that waits hands over to the next
    task of the round itself, and the last one back to the caller, which flushes (one switch per
    wait, not two through the caller: ~0.4 µs each, 64 tasks a flush)."""

    __slots__ = ("tasks", "index", "driver", "queue", "waiting", "running")

    def __init__(self, tasks):
        self.tasks, self.index = tasks, {task: i for i, task in enumerate(tasks)}
        self.driver = greenlet.getcurrent()
        self.queue = collections.deque(range(len(tasks)))   # the round's tasks still to run, in order
        self.waiting: list = []     # those that wait for the next flush, in order
        self.running = None         # the task running now: the one that ended when the caller resumes

    def wait(self, index):
        """Task ``index`` waits: run the next task of the round, or hand back to the caller."""
        self.waiting.append(index)
        if self.queue:
            self.running = nxt = self.queue.popleft()
            self.tasks[nxt].switch()
        else:
            self.driver.switch()


class _Exit:
    """``Scope.__exit__``, handing each lookup a fresh callable watched by a weak reference (the
    exit hook). A ``with`` statement looks ``__exit__`` up before entering and holds what it
    got until it has called it; if an interrupt arrives as the call starts, before
    ``Scope._exit`` runs its first line, the callable is dropped unrun and the hook's callback
    ends the scope, which would otherwise stay current (later eager calls recorded into it)
    and hold its memory. A ``functools.partial``: CPython unpacks a bound method before calling
    it, and a Python ``__call__`` would keep the callable alive in the interrupt's traceback
    (which a REPL keeps as ``sys.last_traceback``)."""

    def __get__(self, scope, owner=None):
        if scope is None:
            return Scope._exit
        bound = functools.partial(Scope._exit, scope)
        scope._hook = weakref.ref(bound, scope._unwound)
        return bound


Scope.__exit__ = _Exit()


def _detached_why(s) -> str:
    """Why a value that carried a gradient entered a scope as data (``s``: its ``_scope``, an
    enclosing scope or FINISHED)."""
    if s.__class__ is Scope:
        return ("a future of an enclosing la.batching() scope, which entered this inner scope as data; call "
                "backward() in the scope that computed it")
    return FINISHED.why


DERIVED: dict = {}  # (op, parameter ref, attribute keys...) -> that view of the parameter, as a parameter


def _derived(op, operands, attrs):
    """``W.T``, ``W.reshape(...)``, ``W[1:3]`` of a parameter ``W``: a parameter
    viewing W's memory (so it sees in-place updates, as W does), the same one for every call,
    keyed as the generated stubs key the call; eagerly too, so that one made before a scope
    passes its gradient when used in it. Computed as a constant instead, it took the
    generic path and ran eagerly every call, and ``W.T @ x`` then copied W.T into an input node
    per call: ~12 µs a call, and a batch of stacked copies instead of one shared weight."""
    base = operands[0]
    if base.__class__ is not LazyArray or base._ref >= 0 or len(op.operands) > 2 or op.nout is not None \
            or base._value.__class__ is not np.ndarray:
        return None
    key = (op, base._ref, *map(_hashable, operands[1:]), *map(_hashable, attrs.values()))
    derived = DERIVED.get(key)
    if derived is None:
        value = op.eager(np, base._value, *operands[1:], **attrs)
        if value.__class__ is not np.ndarray or value.base is None or not np.shares_memory(value, base._value):
            return None     # not a view (a reshape that copied, a device array): computed eagerly
        args = ", ".join(map(repr, [*operands[1:], *attrs.values()]))     # distinct views, distinct labels
        rest = operands[1:]
        derived = new_parameter(value, f"{PARAM_NAMES.get(-base._ref, 'param')}.{op.name}({args})",
                                base=base._scope, view=lambda g: op.eager(np, g, *rest, **attrs))
        DERIVED[key] = derived
        weakref.finalize(base, DERIVED.pop, key, None)  # held while its parameter lives
    return derived


_ARG_KINDS: dict = {}  # a cell argument's type -> "int", "static" or "array"


def _arg_kind(cls) -> str:
    """Integers are per-call indices; objects that are not values (a model's parameter bundle, a
    config) are static: passed to the traced body as they are and keyed by identity."""
    if cls is IndexArg or issubclass(cls, (int, np.integer)) and not issubclass(cls, (bool, np.bool_)):
        kind = "int"
    elif issubclass(cls, (LazyArray, float, complex, bool, np.generic, np.ndarray, list, tuple)) \
            or hasattr(cls, "__cuda_array_interface__"):
        kind = "array"
    else:
        kind = "static"
    _ARG_KINDS[cls] = kind
    return kind


_MAKERS = {"_LA": LazyArray, "_new": _new}  # namespace of the generated handle makers


def _part_maker(n: int):
    """The handles of an n-output node's parts (``ref + p + 1``) written out: a comprehension
    costs ~80 ns more per handle."""
    made = "\n    ".join(handle_source(f"h{p}", "scope", f"ref + {p + 1}", f"classes[{p}]") for p in range(n))
    exec(f"def make(scope, ref, classes):\n    {made}\n    return ({''.join(f'h{p}, ' for p in range(n))})", _MAKERS)
    return _MAKERS["make"]


_PART_MAKERS = [None] + [_part_maker(n) for n in range(1, 9)]
exec(f"def future(scope, ref, cls):\n    {handle_source('h', 'scope', 'ref', 'cls')}\n    return h", _MAKERS)
future = _MAKERS["future"]  # one handle, filled in like the parts' (``Scope.append``, ``Scope.fuse``)


def parts(scope, ref, classes):
    """Handles of a multi-output node's parts."""
    if len(classes) < len(_PART_MAKERS):
        return _PART_MAKERS[len(classes)](scope, ref, classes)
    return tuple([scope.handle(ref + p + 1, c) for p, c in enumerate(classes)])


_refcount = sys.getrefcount
_LIBRARY = tuple(os.path.dirname(os.path.dirname(m.__file__)) + os.sep + m.__name__ + os.sep
                 for m in (batching, np) if m.__file__) + (os.path.dirname(__file__) + os.sep,)


def _user_line() -> str:
    """``file:line (source)`` of the innermost caller outside lazyarray, batching and numpy."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARY):
        frame = frame.f_back
    if frame is None:
        return "an unknown place"
    import linecache
    source = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f"{frame.f_code.co_filename}:{frame.f_lineno} ({source})"


def _own(value):
    """``value`` as an array of its own (a view of an arena, copied)."""
    return value.copy() if getattr(value, "base", None) is not None else value


_SCALARS = (int, float, complex, np.generic)


def _constants_only(operands) -> bool:
    """Whether a call's array operands are all constants of a trace: read-only parameters (what
    ``la.full`` and ``Scope._trace_constant`` make) or arrays, not parameters training updates."""
    for a in operands:
        for x in (a if a.__class__ is list or a.__class__ is tuple else (a,)):
            if x.__class__ is LazyArray and (x._ref >= 0 or getattr(x._value, "flags", None) is None
                                             or x._value.flags.writeable):
                return False
    return True


def _captured(a) -> bool:
    """An array operand that is neither a LazyArray, a traced integer argument nor a scalar."""
    return a.__class__ is not LazyArray and a.__class__ is not IndexArg and not isinstance(a, _SCALARS)


def _check_parts(what, n):
    """A reference numbers a node's outputs in its low ``PART_BITS`` bits: more would spill
    into the node id and read another node's value."""
    if n > batching.PART_MASK:
        raise ShapeError(f"{what}: {n:,} outputs, but a node in a scope has at most "
                         f"{batching.PART_MASK:,}; split in two steps, or reshape and index rows")


def _shape_dtype(a):
    if isinstance(a, LazyArray):
        return a.shape, a.dtype
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        return a.shape, a.dtype
    arr = np.asarray(a)
    return arr.shape, arr.dtype


def _index_key(op, a, aux):
    if a.__class__ is IndexArg:
        aux.append(a.sentinel)
        return ()
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        aux.append(_plain_index(f"la.{op.name}: index", int(a)))
        return ()
    if isinstance(a, LazyArray):
        raise TypeError(f"la.{op.name}: indices must be Python/numpy integers (data known while "
                        "recording), not a LazyArray; compute with la.pick/la.where instead")
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind == "f"):  # [] is int to numpy
        raise TypeError(f"la.{op.name}: indices must be integers, got dtype {arr.dtype}")
    values = arr.ravel().tolist()
    if values and min(values) <= IndexArg.sentinel_base:
        _plain_index(f"la.{op.name}: index", min(values))
    aux.extend(values)
    return arr.shape


def _plain_index(what, v):
    """``v`` as a user's index: one that a trace would read as a cell's integer argument (a
    sentinel, ``IndexArg.sentinel_base`` or below) is out of range for any axis, refused here
    (passed on, it took another argument's value, or numpy's wrapping ``take`` spun on it)."""
    if v <= IndexArg.sentinel_base:
        raise IndexError(f"{what} {v} is out of range")
    return v


class _BoolKey:
    """A bool in a key: not equal to 0 and 1 (``axis=True`` must not find ``axis=1``), hashed by
    identity (a prebuilt (bool, v) tuple would be hashed anew at every lookup)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return repr(self.value)


TRUE_KEY, FALSE_KEY = _BoolKey(True), _BoolKey(False)


def _hashable(v):
    """Attributes as hashable key parts (slices are unhashable before Python 3.12). Numbers other
    than integers keep their type: ``axis=1.0``, ``axis=True`` or ``x[0:2.0]`` equal the key of
    ``axis=1`` or ``x[0:2]``, and would run that entry where numpy (and eager mode) refuse them."""
    c = v.__class__
    if c is int or v is None:
        return v
    if c is bool:
        return TRUE_KEY if v else FALSE_KEY
    if c is slice:      # a basic index's parts: ints and None, looked at inline
        a, b, k = v.start, v.stop, v.step
        return ("slice", a if a is None or a.__class__ is int else _hashable(a),
                b if b is None or b.__class__ is int else _hashable(b),
                k if k is None or k.__class__ is int else _hashable(k))
    if c is tuple or isinstance(v, tuple):
        return tuple([_hashable(x) for x in v])
    if isinstance(v, list):     # not the tuple's key: numpy refuses axis=[0, 1] where it takes (0, 1)
        return ("list",) + tuple(_hashable(x) for x in v)
    if v is Ellipsis:
        return ("...",)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, complex, np.generic)):
        return scalar_key(v)
    return v


def _real(v):
    if isinstance(v, list):
        return tuple(_real(x) for x in v)
    if isinstance(v, tuple):
        return tuple(_real(x) for x in v)
    return v


def _describe_cls(cls):
    shape, dtype = CLASSES[cls]
    return f"{dtype.name}[{','.join(map(str, shape))}]"


def _describe_spec(spec):
    kind = spec[0]
    if kind == "stacked":
        return _describe_cls(spec[2])
    if kind == "shared":
        value = spec[1]
        return f"{PARAM_NAMES.get(-spec[2], 'param')}:{value.dtype.name}[{','.join(map(str, value.shape))}]"
    if kind == "const":
        return repr(spec[1])
    if kind == "index":
        return f"index{list(spec[1]) if spec[1] else ''}"
    if kind == "int":
        return "int"
    if kind == "static":
        return type(spec[1]).__name__
    return "[" + ", ".join(_describe_spec(s) for s in spec[1]) + "]"


def _describe_call(op, layout, attrs):
    parts = [_describe_spec(s) for s in layout] + [f"{k}={v!r}" for k, v in attrs.items()]
    return f"{op.name}({', '.join(parts)})"
