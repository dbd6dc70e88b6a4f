"""``la.cell``: a user function (a TreeLSTM node, an LSTM step) as ONE batching unit.

Recording a cell call appends one node, so a scope of 64 trees holds ~2,500 nodes instead of
~45,000 ops. The body is traced once per signature (function, argument classes, parameter
identities, closed-over scalars) into a static plan: its ops are scheduled once, with the agenda
scheduler, so independent ops of equal signature inside the body share a kernel; a batch of B
calls then runs one kernel per body batch over all B calls (JIT-batching §4.1, Cavs §3).
"""
from __future__ import annotations

import functools
import itertools
import types
import weakref

import numpy as np

import batching
from ops_registry import ShapeError

from . import arrange, bindings, blocks
from .array import CLASSES, NUMPY_INTS, LazyArray, ScopeError, class_id, handle_source, joins_rows, scalar_key
from .fusion import Detached
from .state import SCOPE

PART_BITS, PART_MASK = batching.PART_BITS, batching.PART_MASK


class CellError(ScopeError):
    """A cell body that a static subgraph cannot hold."""

    def __init__(self, *args):
        super().__init__(*args)
        # the traces running in this thread cannot use their body's result any more: a body
        # that catches this error and goes on (try/except Exception) takes a path that eager
        # code never takes, and its trace would run that path for every call
        scope = SCOPE.get()
        while scope is not None:
            if scope.tracing is not None and scope.refused is None:
                scope.refused = self
            scope = scope._outer


PATTERNS = 4       # recorders per cell and argument count (see Cell.specialise)
_serials = itertools.count(1)
_statics: dict = {}     # id(static argument) -> (its key, weak reference to it): by identity


def static_key(a):
    """The signature part of a static argument (a model's parameter bundle): a serial number
    per object, by identity (README: "static, keyed by identity"), held by a weak reference so
    that the signature table does not keep a dropped model and its weights alive. Not by
    equality: two bundles that compare equal (a class with ``__eq__`` by name, a dataclass
    whose fields compare equal) hold different parameters, and one shared trace ran the first
    one's weights for both; a dataclass (``eq=True`` makes it unhashable) works as well.
    Objects without weak references are keyed by value where they are plain values (strings,
    numbers) or compare by identity anyway, else by identity, held by the key (a slotted module
    with ``__eq__`` by name: keyed by equality, two of them shared one trace)."""
    entry = _statics.get(id(a))
    if entry is not None and entry[1]() is a:
        return entry[0]
    try:
        ref = weakref.ref(a, functools.partial(_forget, id(a)))
    except TypeError:   # no weak references: a value (a string) by value, anything else by identity
        c = a.__class__
        if c in _VALUES or c.__eq__ is object.__eq__ or c.__hash__ is None:
            return ("static", a)        # a value, or equal only to itself; unhashable (a dict): refused
        return ("static", _Same(a))     # held by the key, so that its id is not reused
    k = ("static", next(_serials))
    _statics[id(a)] = (k, ref)
    return k


_VALUES = frozenset((str, bytes, int, float, complex, bool, type(None), range, frozenset))


class _Same:
    """A static argument that has no weak references and is not a plain value, keyed by identity:
    a slotted module whose ``__eq__`` compares names (keyed by equality, two modules equal by name
    shared one trace: the first one's weights for both)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return other.__class__ is _Same and other.obj is self.obj


def rekey(obj, held) -> bool:
    """Give ``obj`` a new key (static_key's serial, or its serial in a cell's ``held``), so that
    the traces keyed on it are not found again: a parameter it holds was rebound. False where
    it is keyed by identity alone (no weak references, and hashable)."""
    entry = _statics.get(id(obj))
    if entry is not None and entry[1]() is obj:
        _statics[id(obj)] = (("static", next(_serials)), entry[1])
        return True
    entry = held.get(id(obj))
    if entry is not None and entry[0] is obj:
        held[id(obj)] = (obj, next(_serials))
        return True
    return False


def _forget(i, ref, statics=_statics):
    """Drop a dead static argument's entry (not a newer object's that reuses its id); the table
    is bound here because the callback may run while the interpreter tears modules down."""
    entry = statics.get(i)
    if entry is not None and entry[1] is ref:
        del statics[i]


class Cell:
    """See ``la.cell``. Calling it outside a scope runs the function eagerly."""

    def __init__(self, fn):
        self.key = next(_serials)   # in signatures instead of the cell, which holds its closure
        self.fn = fn
        self.name = getattr(fn, "__qualname__", repr(fn))
        self.closure = getattr(fn, "__closure__", None) or ()
        self.fn_globals = getattr(fn, "__globals__", {})    # where the watched globals live
        self.code = getattr(fn, "__code__", None)           # whose global names the body reads
        self.watched = None     # module globals the body names that held parameters or scalars
        self.held = {}          # unhashable values closed over, by id: see _state_key
        self.fast = {}          # per argument count: recorders made for argument patterns
        self.patterns = set()   # the patterns they were made for
        self.flat = {}          # nesting structure of sequence arguments -> the cell of their items
        functools.update_wrapper(self, fn)

    def __call__(self, *args):
        scope = SCOPE.get()
        if scope is None:
            return self.fn(*args)
        return self.record(scope, args)

    def record(self, scope, args, tried=None):
        """Record a call: through the first recorder of this cell whose guards pass (but `tried`,
        which already failed), else the generic path."""
        for fast in self.fast.get(len(args), ()):
            if fast is not tried:
                node = fast(scope, args)
                if node is not None:
                    return node
        return self.generic(scope, args)

    def generic(self, scope, args):
        """Record a call that no recorder of this cell takes: sequences of arrays among its
        arguments, a new signature, an error to raise."""
        for a in args:
            if _is_seq(a.__class__) and _holds_lazy(a):
                return self._record_flat(args)
        return scope.record_cell(self, args)

    def _record_flat(self, args):
        """A call with tuples or lists of LazyArrays among its arguments (an LSTM's ``(h, c)``
        state): recorded as a call of this body with those sequences' items as arguments of their
        own (one cell per nesting structure), rebuilt before the body runs. Taken as one array
        argument, the sequence was converted with np.array, which forced its futures: a flush
        per call."""
        flat, structure = [], []
        for a in args:
            c = a.__class__
            if _is_seq(c):
                for x in a:     # a flat sequence (the common case): its length is its structure
                    if _is_seq(x.__class__):
                        structure.append(_flatten(a, flat))
                        break
                else:
                    if _holds_lazy(a):
                        flat += a
                        structure.append((c, len(a)))
                    else:
                        flat.append(a)
                        structure.append(None)
                continue
            flat.append(a)
            structure.append(None)
        structure = tuple(structure)
        inner = self.flat.get(structure)
        if inner is None:
            inner = self.flat[structure] = _FlatCell(self, structure)
        return inner(*flat)

    def specialise(self, args, kinds, nout):
        """Make a recorder in ``self.fast[len(args)]`` (and, for the first pattern, this cell's
        own ``__call__``): the recording path for calls like ``args`` (futures of the scope with
        the same classes, parameters, Python ints, static objects of the same classes), for up
        to `PATTERNS` patterns per argument count (a cell used at two model sizes, or on two
        kinds of node, records every call at the recorder's cost). Guards, then the entry
        (memoised while the static objects, the parameters and the signature table stay the
        same), then the node appended inline; anything else returns None and takes the generic
        path (``Scope.record_cell``), which also raises every error. One description, per
        argument its kind and what a call's argument must match (a class id, a class, or shape,
        dtype and class id), becomes the compiled recorder (``lazyarray._recorders.CellPattern``)
        where the recording path runs compiled, else generated Python (``_generate``)."""
        expect = tuple(a._cls if k == "future" else class_id(a.shape, a.dtype) if k == "concrete"
                       else (a.shape, a.dtype, class_id(a.shape, a.dtype)) if k == "ndarray"
                       else None if k in ("param", "int") else a.__class__ for a, k in zip(args, kinds))
        pattern = tuple(zip(kinds, expect))
        if pattern in self.patterns or len(self.fast.get(len(args), ())) >= PATTERNS:
            return
        self.patterns.add(pattern)
        compiled = _compiled()
        if compiled is None:
            fast, call = self._generate(kinds, expect, nout)
        else:
            fast, call = compiled.CellPattern(self, kinds, expect, nout), compiled.CellCall(self)
        # The first pattern also makes this cell's own __call__ (a class of its own): the
        # dispatch through Cell.__call__ and a second frame cost ~0.15 µs of a ~1.2 µs call.
        if not self.fast:
            self.__class__ = type("Cell", (Cell,), {"__call__": call, "__module__": Cell.__module__})
        self.fast.setdefault(len(args), []).append(fast)

    def _generate(self, kinds, expect, nout):
        """(recorder, __call__) of a pattern (see ``specialise``) as Python source, generated."""
        names = [f"a{i}" for i in range(len(kinds))]
        lines, key, refs, aux, statics, inputs = [], [str(self.key)], [], [], [], []
        env = {"_cell": self, "_LA": LazyArray, "_new": object.__new__, "_static": static_key,
               "_memo": [(None,), (None,)], "_stale": bindings.stale, "_draw": _draw, "_ND": np.ndarray, "_skey": scalar_key, "_copy": np.array, "_NPINTS": NUMPY_INTS}
        for i, (kind, e) in enumerate(zip(kinds, expect)):
            n = names[i]
            if kind == "future":
                lines += [f"if {n}.__class__ is not _LA or {n}._scope is not scope or {n}._cls != {e}: return None",
                          f"r{i} = {n}._ref"]
                key.append(str(e))
                refs.append(f"r{i}")
            elif kind == "concrete":    # a value from outside the scope, once it is an input node here
                lines += [f"if {n}.__class__ is not _LA: return None", f"kn = scope._concrete.get(id({n}))"]
                lines += [f"if kn is None or kn[0] is not {n} or kn[2] != {e}: return None", f"r{i} = kn[1]"]
                key.append(str(e))
                refs.append(f"r{i}")
            elif kind == "param":
                lines.append(f"if {n}.__class__ is not _LA or {n}._ref >= 0: return None")
                key.append(f"{n}._ref")
                statics.append(f"{n}._ref")
            elif kind == "int":     # numpy ints (ids read from arrays) too, as ints
                lines += [f"if {n}.__class__ is not int:", f"    if {n}.__class__ not in _NPINTS: return None",
                          f"    {n} = int({n})"]
                key.append("'int'")
                aux.append(n)
            elif kind == "const":       # a scalar constant (a rate, a flag): keyed by value, as Scope._operand keys it
                env[f"_C{i}"] = e
                lines += [f"if {n}.__class__ is not _C{i}: return None",
                          f"q{i} = (_C{i}, {n}) if {n} and {n} == {n} else _skey({n})" if e is float
                          else f"q{i} = _skey({n})"]
                key.append(f"q{i}")
                statics.append(f"q{i}")
            elif kind == "ndarray":     # per-call data: an input node, made once the call is known good
                env[f"_D{i}"] = e[1]
                lines.append(f"if {n}.__class__ is not _ND or {n}.shape != {e[0]!r} or {n}.dtype != _D{i}: return None")
                key.append(str(e[2]))
                refs.append(f"r{i}")
                inputs.append(f"r{i} = scope.input(_copy({n}))._ref")
            else:
                env[f"_C{i}"] = e
                lines.append(f"if {n}.__class__ is not _C{i}: return None")
                key.append(f"_static({n})")
                statics.append(n)
        reads = []      # the values environment() keys on: the memo holds them, by identity
        if self.watches():
            key.append("_cell.environment()")
            for j, c in enumerate(self.closure):
                env[f"_K{j}"] = c
                reads += ["try:", f"    v{len(statics)} = _K{j}.cell_contents",
                          "except ValueError:", "    return None"]      # an empty cell
                statics.append(f"v{len(statics)}")
            env["_G"] = self.fn_globals
            for n in self.watched:
                reads.append(f"v{len(statics)} = _G.get({n!r})")
                statics.append(f"v{len(statics)}")
        # the memo of the two latest patterns (calls that alternate two bundles, the two types
        # of a tree's nodes, hit it too), each replaced whole so that threads never see half
        # of one: (the scope's memo key, static objects, parameter ids and watched values...,
        # signature, output classes, bounds). The key is new in every scope (and when one
        # fails), so a scope's first call looks the entry up and checks its bindings.
        same = " and ".join(["t[0] is mk"] + [f"t[{j + 1}] {'==' if n.endswith('_ref') or n[0] == 'q' else 'is'} {n}"
                                               for j, n in enumerate(statics)])
        at = len(statics) + 1
        bounds = [f"(b[{j}] is None or -b[{j}] <= {n} < b[{j}])" for j, n in enumerate(aux)]
        found = f"sig, classes, b, k = t[{at}], t[{at + 1}], t[{at + 2}], t[{at + 3}]"
        lookup = [*reads, "t = _memo[0]", f"if {same}:", f"    {found}",
                  "else:", "    t = _memo[1]", f"    if {same}:", f"        {found}",
                  "        _memo[1] = _memo[0]", "        _memo[0] = t",
                  "    else:", f"        e = scope.entries.get(({', '.join(key)},))",
                  "        if e is None or e[4] is not None and _stale(e[4]): return None",
                  "        sig, classes, b, k = e[0], e[1], e[2], e[5]", "        _memo[1] = _memo[0]",
                  f"        _memo[0] = (mk, {''.join(n + ', ' for n in statics)}sig, classes, b, k)"]
        if aux:
            lookup.append(f"if b is not None and not ({' and '.join(bounds)}): return None")
        depth = ["d = 0"] + [f"t = depth[{r} >> {PART_BITS}]\nif t > d: d = t" for r in refs]
        nodes = ", ".join(refs + aux)
        body = "\n".join([
            f"{', '.join(names)}{',' if len(names) == 1 else ''} = args",
            *lines,
            "mk = scope.memo_key",
            *lookup,
            *inputs,
            "graph_sig = scope._sig",
            "nid = len(graph_sig)",
            "graph_sig.append(sig)",
            "depth = scope._depth",
            *depth,
            "depth.append(d + 1)" if refs else "depth.append(0)",
            f"scope._ins.fromlist([{nodes}])" if nodes else "",
            "if k: scope._ins.fromlist(_draw(k))",
            f"ref = nid << {PART_BITS}",
            *([handle_source(f"h{p}", "scope", f"ref + {p + 1}", f"classes[{p}]") for p in range(nout)]
              if nout else [handle_source("h0", "scope", "ref", "classes")]),
            f"return ({''.join(f'h{p}, ' for p in range(nout))})" if nout else "return h0",
        ]).replace("\n", "\n    ")
        call = (f"def __call__(self, *args):\n    scope = _current()\n    if scope is None:\n"
                f"        return _fn(*args)\n    if len(args) != {len(kinds)}:\n"
                f"        return self.record(scope, args)\n    "
                + body.replace("return None", "return self.record(scope, args, fast)"))
        env.update(_current=SCOPE.get, _fn=self.fn)
        exec(compile(f"def fast(scope, args):\n    {body}\n{call}", f"<la.cell {self.name} recorder>", "exec"), env)
        return env["fast"], env["__call__"]

    def watches(self) -> bool:
        """Whether calls key on ``environment()``; on the first call, find the globals to watch
        (not at decoration: a module may define its parameters after its functions)."""
        if self.watched is None:
            g = self.fn_globals
            self.watched = tuple(n for n in _names(self.code) if n in g and _is_state(g[n]))
        return bool(self.closure or self.watched)

    def roots(self, specs) -> list:
        """The objects a trace with argument ``specs`` is keyed on by identity and may find
        parameters in: static arguments, closed-over values and the globals the body names."""
        out = [s[1] for s in specs if s[0] == "static"]
        for c in self.closure:
            try:
                out.append(c.cell_contents)
            except ValueError:  # an empty cell
                pass
        g = self.fn_globals
        out += [g[n] for n in dict.fromkeys(_names(self.code)) if n in g]
        return out

    def environment(self) -> tuple:
        """What the body reads besides its arguments, as far as a call can check it cheaply:
        every value it closes over, and the watched globals (parameters by identity, scalars by
        type and value, tuples by their items, other objects by identity). Part of the
        signature, so rebinding one re-traces instead of running a trace of the old value;
        what the body reaches inside a mutable object (a list's items, an attribute) is frozen
        at trace time, like its code."""
        held, out = self.held, []
        for c in self.closure:
            try:
                out.append(_state_key(c.cell_contents, held))
            except ValueError:  # an empty cell
                out.append(None)
        g = self.fn_globals if self.watched else None
        for n in self.watched:
            out.append(_state_key(g.get(n), held))
        return tuple(out)

    def __get__(self, obj, objtype=None):
        """``@la.cell`` on a method: the instance is the first argument, a static object keyed
        by identity (a module holding its parameters)."""
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self):
        return f"<la.cell {self.name}>"


_SEQS: dict = {tuple: True, list: True}   # class -> whether cell arguments of it are flattened


def _is_seq(c) -> bool:
    """Tuples, lists and named tuples (an LSTM state ``State(h, c)``: taken as one array, it
    was forced with np.array and the body got an array without its fields)."""
    seq = _SEQS.get(c)
    if seq is None:
        seq = _SEQS[c] = issubclass(c, tuple) and hasattr(c, "_fields") and hasattr(c, "_make")
    return seq


def _holds_lazy(seq) -> bool:
    """Whether a sequence argument holds arrays (LazyArrays or numpy arrays: taken as one
    array, ``(h, x)`` of two shapes or ``(0.5, x)`` failed in np.array with numpy's message,
    where eager code indexes the tuple); a sequence of numbers stays one array argument."""
    for x in seq:
        c = x.__class__
        if c is LazyArray or c is np.ndarray or _is_seq(c) and _holds_lazy(x):
            return True
    return False


def _rebuild(kind, items):
    return kind(items) if kind is tuple or kind is list else kind._make(items)


def _flatten(a, flat):
    """``a``'s structure (None for a leaf), its leaves appended to ``flat``."""
    c = a.__class__
    if _is_seq(c) and _holds_lazy(a):
        return c, tuple(_flatten(x, flat) for x in a)
    flat.append(a)
    return None


def _unflatten(structure, flat, at):
    """(value, next position) of one argument rebuilt from ``flat[at:]``."""
    if structure is None:
        return flat[at], at + 1
    kind, items = structure
    if items.__class__ is int:      # a flat sequence of that many items
        return _rebuild(kind, flat[at:at + items]), at + items
    out = []
    for s in items:
        v, at = _unflatten(s, flat, at)
        out.append(v)
    return _rebuild(kind, out), at


def _names(code) -> list:
    """Global (and attribute) names a code object and the code nested in it load."""
    if code is None:
        return []
    out = list(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            out += _names(c)
    return out


_SCALARS = (int, float, complex, str, np.generic)


def _is_state(v) -> bool:
    if v.__class__ is LazyArray:
        return v._ref < 0
    if v.__class__ is tuple:
        return any(map(_is_state, v))
    return isinstance(v, _SCALARS)


def _state_key(v, held):
    c = v.__class__
    if c is LazyArray:
        return v._ref if v._ref < 0 else v          # a parameter, or what tracing will reject
    if c is tuple:
        return c, tuple(_state_key(x, held) for x in v)
    if isinstance(v, _SCALARS):
        return scalar_key(v)                        # 1, 1.0 and True trace differently; so do 0.0 and -0.0
    try:
        hash(v)
        return static_key(v)                        # a bundle, a function: not held by the key
    except TypeError:                               # a list, a dict: by identity (kept alive,
        entry = held.get(id(v))                     # so that no other object reuses the id),
        if entry is None or entry[0] is not v:      # as a serial that ``rekey`` can renew
            entry = held[id(v)] = (v, next(_serials))
        return c, entry[1]


def _structure(s) -> str:
    """An argument's nesting for labels: ``_`` an item, ``(_, _)`` a tuple of two, ``[...]`` a list."""
    if s is None:
        return "_"
    kind, items = s
    inner = ", ".join(["_"] * items if items.__class__ is int else map(_structure, items))
    return f"[{inner}]" if kind is list else f"({inner})"


class _FlatCell(Cell):
    """The cell of a body called with sequences of LazyArrays: its arguments are their items
    (see ``Cell._record_flat``). Keyed, traced and specialised as a cell of its own, reading
    (and re-tracing on) what the original body reads: its closure and watched globals."""

    def __init__(self, outer, structure):
        fn = outer.fn

        def flat(*args):
            out, at = [], 0
            for s in structure:
                v, at = unflatten(s, args, at)
                out.append(v)
            return fn(*out)

        unflatten = _unflatten
        Cell.__init__(self, flat)
        self.name = f"{outer.name}<{', '.join(map(_structure, structure))}>"  # which arguments nest
        outer.watches()
        self.closure, self.watched, self.fn_globals = outer.closure, outer.watched, outer.fn_globals
        self.code = outer.code


def cell(fn) -> Cell:
    """Make ``fn`` (LazyArrays in, a LazyArray or a tuple of them out) one batching unit: a
    static subgraph traced once per input signature. Its body must depend only on its array
    arguments, parameters and constants: forcing a value inside it (Python control flow on
    values) or using an array that is neither an argument nor a parameter raises ``CellError``.
    Rebinding a name the body closes over, or a module global it reads that holds a parameter
    or a scalar, re-traces; values inside mutable objects are frozen at trace time.
    Outside a scope the function runs eagerly."""
    if not callable(fn):
        raise TypeError(f"la.cell takes a function, not {type(fn).__name__}")
    return fn if isinstance(fn, Cell) else Cell(fn)


class IndexArg:
    """Stands for an integer argument of a cell while its body is traced: ops that take it as
    an index (``E[w]``, ``pick``) record a sentinel that each call replaces with its own value.
    Not an int: one trace serves every call, so Python code that reads its value (``if k``,
    ``k > 0``, ``words[k]``, ``k + 1``) would run for one made-up value; it raises instead."""

    __slots__ = ("position", "name")
    sentinel_base = -(1 << 60)

    def __init__(self, position, name):
        self.position, self.name = position, name

    @property
    def sentinel(self) -> int:
        return self.sentinel_base - self.position

    def _refuse(self, *_):
        raise CellError(f"integer argument {self.name} of a cell is a per-call index: the body "
                        "may pass it to E[w], la.take or la.pick, but not read it in Python (control "
                        "flow, comparisons, arithmetic), since one trace serves every call; pass a "
                        "value to compute with as an array")

    __bool__ = __int__ = __float__ = __index__ = __hash__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __neg__ = _refuse
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __truediv__ = __rtruediv__ = _refuse


class Step:
    """One batch of the body: ``members`` body nodes of one signature.

    ``mode`` says how k > 1 members run: "parts" reads each operand as one view of adjacent
    outputs of a split (no copy, one kernel); "each" runs an elementwise op member by member
    (joining operands would copy more than a kernel launch costs); "calls" runs members that
    read the same values and differ only in their integer arguments (``scores[good]``,
    ``scores[wrong]``) one by one on those values (``calls``: their ``_fast_call``s), where
    joining would copy the same values k times; "join" concatenates operands member-major, for
    heavy ops where one big kernel beats k small ones."""

    __slots__ = ("payload", "members", "refs", "aux", "nref", "mode", "parts", "fast", "own", "calls")

    def __init__(self, payload, members, refs, aux, nref):
        self.payload, self.members, self.refs, self.aux, self.nref = payload, members, refs, aux, nref
        self.parts = self.fast = self.own = self.calls = None     # own: ``fast`` before ``_in_place``
        if len(members) == 1:
            self.mode = "one"
            self.fast = _fast_call(payload, refs[0], aux[0], members[0] << PART_BITS)
        elif payload.kind == "op" and payload.op.elementwise:
            # members are independent: order them by what they read, so that gates used out of
            # order (sigmoid(f) recorded before sigmoid(i)) still read adjacent parts
            order = sorted(range(len(members)), key=lambda m: refs[m])
            self.parts = _adjacent_parts([refs[m] for m in order], nref)
            if self.parts is not None:
                self.members, self.refs = [members[m] for m in order], [refs[m] for m in order]
                self.aux = [aux[m] for m in order]
            self.mode = "parts" if self.parts is not None else "each"
        else:
            self.mode = "join"
            if payload.kind == "op" and any(spec[0] == "index" for spec in payload.layout) \
                    and all(r == refs[0] for r in refs):
                calls = [_fast_call(payload, refs[m], aux[m], members[m] << PART_BITS) for m in range(len(members))]
                if None not in calls:
                    self.mode, self.calls = "calls", calls


def _draw(k):
    from .keys import call_keys    # (keys imports this module)
    return call_keys(k)


@functools.cache
def _compiled():
    """``lazyarray._recorders``, bound to this module's helpers, where the recording path runs
    compiled (``la.compiled``) and its cell recorders are current; else None."""
    from . import ops, recorders    # (ops imports this module)
    from .scope import Scope
    module = ops._COMPILED
    if not ops.COMPILED or module.KEYS.get(recorders.CELLS_KEY) != recorders.key(recorders.CELLS):
        return None
    module.bind({"_static": static_key, "_stale": bindings.stale, "_draw": _draw},
                LazyArray, Scope)
    return module


def _index_key(position):
    """Where ``CellPlan.run`` keeps integer argument ``position`` among the body values."""
    return -1 - position


def _fast_call(payload, refs, aux, node, into=None):
    """For a one-member op step whose operands are arrays, constants or integer arguments of the
    cell: (call(xp, operands),
    per operand (stacked?, body ref or value), output key, parts), with the layout walked once
    here instead of per batch. Elementwise ops whose stacked operands need no alignment call
    their eager function on the batched operands directly (numpy broadcasting is the rule).
    ``into``: the operand an elementwise step overwrites (see ``_in_place``); ``call``'s ``out``
    (where the caller wants a cell's output, e.g. its arena rows) takes precedence."""
    if payload.kind != "op":
        return None
    sources, stacked, slot = [], [], 0
    for spec in payload.layout:
        kind = spec[0]
        if kind == "index":  # one integer argument of the cell (``E[word]``): read from ``values``
            if spec[1] != () or aux[slot] > IndexArg.sentinel_base:
                return None
            sources.append((True, _index_key(IndexArg.sentinel_base - aux[slot])))
            slot += 1
            continue
        if kind not in ("stacked", "shared", "const"):
            return None
        sources.append((True, refs[spec[1]]) if kind == "stacked" else (False, spec[1]))
        stacked.append(kind == "stacked")
    op, attrs, sources, stacked = payload.op, payload.attrs, tuple(sources), tuple(stacked)
    if blocks.eager_pairs_calls(payload):
        if into is None:
            def call(xp, operands, out=None):
                return op.eager(xp, *operands, out=out)
        else:
            def call(xp, operands, out=None):
                return op.eager(xp, *operands, out=operands[into] if out is None else out)
    elif into is not None:
        def call(xp, operands, out=None):
            return op.batched(xp, stacked, *operands, out=operands[into] if out is None else out, **attrs)
    else:
        def call(xp, operands, out=None):
            return op.batched(xp, stacked, *operands, out=out, **attrs)
    nout = len(payload.part_cls) if payload.part_cls else 0
    return call, sources, node, nout


def _in_place(steps, outputs):
    """Let one-member elementwise steps overwrite an operand that an earlier such step made and
    that nothing reads afterwards, so a body's chain of elementwise temporaries reuses memory
    instead of allocating a new (calls, ...) array per step (fewer page faults, warmer caches).
    Only values that elementwise steps alone read qualify: no view of them can outlive them."""
    def owned(step):
        return step.mode == "one" and step.fast is not None and step.payload.op.elementwise
    made, readers, last = {}, {}, {}
    for i, step in enumerate(steps):
        for refs in step.refs:
            for r in refs:
                readers.setdefault(r >> PART_BITS, []).append(step)
                last[r >> PART_BITS] = i
        if owned(step):
            made[step.members[0]] = step.payload.out_cls
    kept = {r >> PART_BITS for r in outputs}
    for i, step in enumerate(steps):
        if not owned(step) or step.payload.attrs:
            continue
        for j, (flag, r) in enumerate(step.fast[1]):
            node = r >> PART_BITS if flag else None
            if (flag and r & PART_MASK == 0 and made.get(node) == step.payload.out_cls
                    and last[node] == i and node not in kept and all(map(owned, readers[node]))):
                step.own = step.fast
                step.fast = _fast_call(step.payload, step.refs[0], step.aux[0], step.members[0] << PART_BITS, into=j)
                break


def _adjacent_parts(refs, nref):
    """Per operand slot (node, first part) when the members read parts p, p+1, ... of one node."""
    out = []
    for j in range(nref):
        column = [r[j] for r in refs]
        node, first = column[0] >> PART_BITS, column[0] & PART_MASK
        if first == 0 or column != [(node << PART_BITS) + first + m for m in range(len(column))]:
            return None
        out.append((node, first))
    return out


class CellPlan:
    """The traced body: argument placeholders, steps in schedule order, output refs."""

    def __init__(self, name, placeholders, steps, outputs, out_classes, body_nodes, kernels, int_bounds,
                 used=frozenset(), found=(), keys=0):
        self.name = name
        self.keys = keys                   # dropout keys each call draws (lazyarray.keys)
        self.used = used                   # refs of the parameters the body (and cells it calls) reads
        self.bindings = found              # where it found them inside objects (lazyarray.bindings)
        # output refs a one-member step makes, by position: that step writes where the caller asks
        made = {s.members[0] << PART_BITS for s in steps if s.fast is not None}
        self.direct = {}
        for k, r in enumerate(outputs):
            if r in made and r not in self.direct:
                self.direct[r] = k
        self.int_bounds = int_bounds       # per integer argument: the axis size it indexes
        self.placeholders = placeholders   # body node id of each stacked argument
        self.steps = steps
        self.outputs = outputs             # body refs of the results
        self.out_classes = out_classes
        self.body_nodes = body_nodes
        self.kernels = kernels             # kernels per batch of calls (one per step)
        self.blocked = []                  # (first step, last step, rows per block) of each blocked run
        self.join = _argument_join(steps, placeholders, outputs)
        self._run = _compile(self)
        self._run_saving = None     # compiled on first use: most plans never train
        self._backward = None       # likewise, its backward (lazyarray.grad.cell)

    def run(self, xp, args, calls, stats, index_args, cache, into=None, joined=None):
        """Outputs (each (calls, *shape)) for ``calls`` stacked calls; ``args`` are the stacked
        array arguments in placeholder order, ``index_args`` the integer ones, each (calls,);
        ``cache`` lives for one flush (arranged weights are made once per flush); ``into``: per
        output, an array it may be written to directly (an output returned as that very array
        needs no copy); ``joined``: the result of ``join``'s step, gathered by the caller (the
        arguments it joins are then None)."""
        values = {node << PART_BITS: a for node, a in zip(self.placeholders, args)}
        for position, a in enumerate(index_args):
            values[_index_key(position)] = a
        if joined is not None:
            values[self.steps[self.join[0]].members[0] << PART_BITS] = joined
        return self._run(xp, values, stats, into, calls, index_args, cache)

    def run_saving(self, xp, args, calls, stats, index_args, cache, into=None, joined=None):
        """``run`` that keeps every body value for a backward: (outputs, values). No value is
        overwritten in place and no run of steps goes in row blocks (whose scratch is reused)."""
        if self._run_saving is None:
            self._run_saving = _compile(self, saving=True)
        values = {node << PART_BITS: a for node, a in zip(self.placeholders, args)}
        for position, a in enumerate(index_args):
            values[_index_key(position)] = a
        if joined is not None:
            values[self.steps[self.join[0]].members[0] << PART_BITS] = joined
        return self._run_saving(xp, values, stats, into, calls, index_args, cache), values


def _argument_join(steps, placeholders, outputs):
    """(step, placeholder positions in operand order) of a one-member stack or concatenate of
    equal-class arguments that nothing else reads, along the first axis, else None. A batch's
    caller can then gather the arguments straight into the joined result's rows
    (``Executor._compile_join``): one copy where a gather per argument and the join made two
    (TreeLSTM's ``[h_l; h_r]``), none where they already lie so. Joins along a later axis are
    not rows of the result."""
    position = {node << PART_BITS: p for p, node in enumerate(placeholders)}
    reads: dict[int, int] = {}
    for r in [*(r for step in steps for refs in step.refs for r in refs), *outputs]:
        reads[r] = reads.get(r, 0) + 1
    for i, step in enumerate(steps):
        payload = step.payload
        if step.mode != "one" or step.fast is not None or payload.kind != "op" or not joins_rows(payload):
            continue
        refs = step.refs[0]
        if len(payload.layout[0][1]) == len(refs) and all(r in position and reads[r] == 1 for r in refs):
            return i, [position[r] for r in refs]
    return None


def _compile(plan, saving=False):
    """The plan's steps as one straight-line function: a batch of calls then costs the kernels
    and little else (no per-step dispatch, operand lists written out, kernels counted once).
    Runs of elementwise steps also get a loop over row blocks (``lazyarray.blocks``), taken on
    numpy for batches bigger than a block; ``saving``: neither blocks nor values overwritten
    in place, so that every body value is there for a backward."""
    env = {"_arrange_run": arrange.run, "_run_join": _run_join, "_np": np}
    last = {}
    for i, step in enumerate(plan.steps):
        for refs in step.refs:
            for r in refs:
                last[r >> PART_BITS] = i
    kept = {r >> PART_BITS for r in plan.outputs}
    runs = {} if saving else dict(blocks.runs(plan.steps))
    lines, fast_kernels, i = [], 0, 0
    while i < len(plan.steps):
        j = runs.get(i, i)
        plain = []
        for t in range(i, j + 1):
            step_lines, kernels = _step_lines(plan, t, env, saving)
            if plan.join is not None and t == plan.join[0]:  # skipped when the caller joined
                step_lines = [f"if {plan.steps[t].members[0] << PART_BITS} not in values:",
                              *("    " + x for x in step_lines)]
            plain += step_lines
            fast_kernels += kernels
        if j == i:
            lines += plain
        else:
            live = {m for step in plan.steps[i:j + 1] for m in step.members if m in kept or last.get(m, -1) > j}
            rows, blocked = blocks.lines(plan, i, j, env, live)
            plan.blocked.append((i, j, rows))
            lines += [f"if calls > {rows} and xp is _np:", *("    " + x for x in blocked), "else:",
                      *("    " + x for x in plain)]
        i = j + 1
    lines += [f"stats.kernels += {fast_kernels}",
              f"return [{', '.join(f'values[{r}]' for r in plan.outputs)}]"]
    src = "def run(xp, values, stats, into, calls, index_args, cache):\n" + "\n".join("    " + x for x in lines)
    exec(compile(src, f"<la.cell {plan.name} plan>", "exec"), env)
    return env["run"]


def _step_lines(plan, i, env, saving=False):
    """(source lines, kernels they count statically) of step ``i``."""
    step = plan.steps[i]
    env[f"s{i}"] = step
    if step.mode == "calls":
        lines = []
        for m, (call, sources, node, nout) in enumerate(step.calls):
            env[f"f{i}_{m}"] = call
            operands = []
            for j, (stacked, r) in enumerate(sources):
                if not stacked:
                    env[f"c{i}_{m}_{j}"] = r
                operands.append(f"values[{r}]" if stacked else f"c{i}_{m}_{j}")
            lines += [f"r = f{i}_{m}(xp, [{', '.join(operands)}])", f"values[{node}] = r",
                      *(f"values[{node + p + 1}] = r[:, {p}]" for p in range(nout))]
        return lines, len(step.calls)
    if step.fast is None:
        if step.mode == "arranged":  # merged products over arranged weights (lazyarray.arrange)
            return [f"_arrange_run(xp, s{i}, values, stats, cache)"], 0
        if step.mode == "parts":  # one kernel on (calls, k, ...) views of adjacent split parts
            fn, args = blocks.elementwise(env, i, step), blocks.part_args(env, i, step, ":")
            return [f"r = {fn}(xp, {args})",
                    *(f"values[{m << PART_BITS}] = r[:, {p}]" for p, m in enumerate(step.members))], 1
        if step.mode == "each":  # member by member on its own operands (no joining copies)
            fn, source = blocks.elementwise(env, i, step), "values[{}]".format
            return [f"values[{m << PART_BITS}] = {fn}(xp, {blocks.member_args(env, i, step, p, source)})"
                    for p, m in enumerate(step.members)], len(step.members)
        return [f"_run_join(xp, s{i}, values, stats, calls, index_args, cache)"], 0
    call, sources, node, nout = step.own if saving and step.own is not None else step.fast
    env[f"f{i}"] = call
    operands = []
    for j, (stacked, r) in enumerate(sources):
        if stacked:
            operands.append(f"values[{r}]")
        else:
            env[f"c{i}_{j}"] = r
            operands.append(f"c{i}_{j}")
    if arrange.reads_weight(step.payload):
        env["_weight"] = arrange.weight
        operands[0] = f"_weight(xp, {operands[0]}, calls, stats, cache)"
    invoke = f"f{i}(xp, [{', '.join(operands)}]"
    k = plan.direct.get(node)
    if k is None:
        lines = [f"r = {invoke})"]
    else:
        lines = ["if into is None:", f"    r = {invoke})", "else:", f"    t = into[{k}]",
                 f"    r = {invoke}, out=t)", "    if r is not t:",
                 "        t[...] = r; stats.kernels += 1; stats.copied_bytes += t.nbytes; r = t"]
    lines.append(f"values[{node}] = r")
    lines += [f"values[{node + p + 1}] = r[:, {p}]" for p in range(nout)]
    return lines, 1


def _run_join(xp, step, values, stats, calls, index_args, cache):
    """k members of a heavy op (or of a nested cell) as one kernel over operands joined
    member-major."""
    payload, k = step.payload, len(step.members)
    operands, stacked, slot = [], [], 0
    for spec in payload.layout:
        kind = spec[0]
        if kind == "list":
            flags, parts = [], []
            for s in spec[1]:
                f, v = _operand(xp, s, step, values, k)
                flags.append(f)
                parts.append(v)
            stacked.append(tuple(flags))
            operands.append(parts)
        elif kind == "index":
            size = int(np.prod(spec[1], dtype=np.int64))
            operands.append(_indices(step.aux, slot, size, spec[1], calls, index_args))
            slot += size
        elif kind in ("int", "static"):  # a nested cell's non-array arguments
            continue
        else:
            f, v = _operand(xp, spec, step, values, k)
            stacked.append(f)
            operands.append(v)
    if len(stacked) == 1 and isinstance(stacked[0], tuple):
        stacked = stacked[0]
    if payload.kind == "cell":
        arrays = [o for o, f in zip(operands, stacked) if f]
        ints = [_indices(step.aux, j, 1, (), calls, index_args) for j in range(len(step.aux[0]))]
        results = payload.plan.run(xp, arrays, k * calls, stats, ints, cache)
        for m, node in enumerate(step.members):
            for p, r in enumerate(results):
                values[(node << PART_BITS) + p + 1] = r[m * calls:(m + 1) * calls]
            if len(results) == 1:
                values[node << PART_BITS] = results[0][m * calls:(m + 1) * calls]
        return
    if arrange.reads_weight(payload):
        operands[0] = arrange.weight(xp, operands[0], k * calls, stats, cache)
    result = payload.op.batched(xp, tuple(stacked), *operands, **payload.attrs)
    stats.kernels += 1
    nout = len(payload.part_cls) if payload.part_cls else 0
    for m, node in enumerate(step.members):
        block = result[m * calls:(m + 1) * calls]
        values[node << PART_BITS] = block
        for p in range(nout):
            values[(node << PART_BITS) + p + 1] = block[:, p]


def _indices(aux, slot, size, shape, calls, index_args):
    """(k * calls, *shape) indices of a step: constants repeat per call, arguments vary."""
    idx = np.asarray(aux, dtype=np.int64)[:, slot:slot + size]
    out = np.repeat(idx, calls, axis=0)
    arg = idx <= IndexArg.sentinel_base
    if arg.any():
        for m, j in zip(*np.nonzero(arg)):
            out[m * calls:(m + 1) * calls, j] = index_args[IndexArg.sentinel_base - idx[m, j]]
    return out.reshape((len(aux) * calls,) + shape)


def _operand(xp, spec, step, values, k):
    """A body operand for all k members of a step, stacked member-major: (k * calls, ...)."""
    kind = spec[0]
    if kind in ("shared", "const"):
        return False, spec[1]
    j = spec[1]
    arrays = [values[refs[j]] for refs in step.refs]
    return True, arrays[0] if k == 1 else xp.concatenate(arrays, axis=0)


def trace(cell_obj: Cell, specs) -> CellPlan:
    """Run the body once on placeholders in a scope that never executes; keep its schedule."""
    from .scope import Scope
    scope = Scope(scheduler="agenda")
    scope.tracing = cell_obj.name
    scope.first_key = sum(1 for spec in specs if spec[0] == "int")
    try:
        scope.__enter__()
        args, placeholders = [], []
        code = getattr(cell_obj.fn, "__code__", None)
        for i, spec in enumerate(specs):
            if spec[0] == "int":
                named = code is not None and i < code.co_argcount
                args.append(IndexArg(spec[1], repr(code.co_varnames[i]) if named else f"#{i + 1}"))
            elif spec[0] == "stacked":
                shape, dtype = CLASSES[spec[2]]
                handle = scope.input(np.zeros(shape, dtype))
                placeholders.append(handle._ref >> PART_BITS)
                args.append(handle)
            elif spec[0] == "shared":
                args.append(spec[3])
            else:                      # constants and static arguments
                args.append(spec[1])
        scope.sealed = True
        result = cell_obj.fn(*args)
        if scope.refused is not None:
            raise CellError(f"cell {cell_obj.name}: its body caught this error and went on: {scope.refused} "
                            "(one trace serves every call, so it must take the path eager code takes: "
                            "let CellError propagate)") from scope.refused
        results = []
        structure = _output_structure(cell_obj.name, result, results)
        single = structure is None
        for r in results:
            if r._scope.__class__ is Detached:
                r._scope.revive(r)  # an intermediate fused into another node, returned as well
            if r._scope is not scope:
                raise CellError(f"cell {cell_obj.name}: returns an array that is neither computed in its body "
                                "nor an argument of it")
        ints = [spec[1] for spec in specs if spec[0] == "int"]
        int_bounds = tuple(scope.int_bounds.get(p) for p in ints) if ints else None
        view = scope.discard()
    except ShapeError as error:     # raised at the body's op: say which cell's body it is in
        raise ShapeError(f"cell {cell_obj.name}: {error}") from None
    finally:
        scope.end()     # an error or an interrupt leaves nothing behind
    batches = batching.AgendaScheduler().schedule(view)
    table = view.table
    steps, used = [], set()
    for batch in batches:
        sig = int(view.sig[batch[0]])
        payload = table.payload[sig]
        if payload.kind == "input":
            continue
        used.update(parameters_of(payload))
        nref, naux = table.nref[sig], table.naux[sig]
        offsets = view.offsets[batch]
        refs = [view.ins[o:o + nref].tolist() for o in offsets]
        aux = [view.ins[o + nref:o + nref + naux].tolist() for o in offsets]
        steps.append(Step(payload, batch.tolist(), refs, aux, nref))
    steps = arrange.arrange(steps, len(view))
    _in_place(steps, [r._ref for r in results])
    out_classes = tuple(r._cls for r in results)
    kernels = sum(s.payload.plan.kernels if s.payload.kind == "cell" else
                  len(s.members) if s.mode in ("each", "calls") else 1 for s in steps)
    plan = CellPlan(cell_obj.name, placeholders, steps, [r._ref for r in results],
                    out_classes[0] if single else out_classes, len(view), kernels, int_bounds,
                    frozenset(used), bindings.find(cell_obj.roots(specs), used), scope.keys)
    plan.structure = structure
    return plan


def _output_structure(name, value, flat):
    """What a body returned, as eager code gets it: None for one LazyArray (appended to
    ``flat``), ``"tuple"`` for a tuple of them, ``"none"`` for None, else the nesting of lists,
    tuples, named tuples and dicts whose leaves are appended to ``flat`` (rebuilt per call by
    ``rebuild``), a parameter returned as it is kept as itself."""
    c = value.__class__
    if c is LazyArray:
        if value.is_parameter:      # returned as it is: every call gives the parameter itself
            return "parameter", weakref.ref(value)  # (the plan must not keep a dropped model alive)
        flat.append(value)
        return None
    if value is None:
        return "none"
    if c is tuple and all(x.__class__ is LazyArray and not x.is_parameter for x in value):
        flat.extend(value)
        return "tuple"
    if c is dict:
        return dict, tuple((k, _output_structure(name, v, flat)) for k, v in value.items())
    if c is list or c is tuple or _is_seq(c):
        return c, tuple(_output_structure(name, v, flat) for v in value)
    raise CellError(f"cell {name}: must return LazyArrays computed from its arguments (alone, or in tuples, "
                    f"lists or dicts), or None; got {type(value).__name__}")


def rebuild(structure, parts):
    """A call's result in the body's structure (``_output_structure``) from its output handles."""
    leaves = iter(parts)

    def build(s):
        if s is None:
            return next(leaves)
        kind, items = s
        if kind == "parameter":
            return items()
        if kind is dict:
            return {k: build(v) for k, v in items}
        values = [build(v) for v in items]
        return kind(values) if kind is list or kind is tuple else kind._make(values)

    return build(structure)


def parameters_of(payload):
    """Refs of the parameters a body step reads: its shared operands, and a nested cell's."""
    specs = list(payload.layout)
    for spec in specs:
        if spec[0] == "list":
            specs += spec[1]
    found = [s[2] for s in specs if s[0] == "shared"]
    return found + list(payload.plan.used) if payload.kind == "cell" else found
