"""The numpy-like functions, ``LazyArray`` methods and operators, generated from
``ops_registry``: each stub runs the eager kernel outside a scope and records inside one.

Stubs are generated as source (not closures over ``*args``) so that a call costs what a
hand-written function would: fixed parameters, no argument packing beyond one tuple.
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from ops_registry import ARRAY, ARRAYS, ATTR, INDEX, REGISTRY, OpDef, ShapeError
from ops_registry.index import basic_index

from . import recorders
from . import scope as _scope
from .array import NUMPY_INTS, NUMPY_SCALARS, RANK0, LazyArray, _concrete, _to_numpy, class_id, handle_source, scalar_key
from .executor import Executor
from .cell import IndexArg
from .fusion import CONSUMERS, Detached
from .grad.leaf import ENABLED as GRAD
from .grad.tape import Node, Part, carries
from .scope import PART_BITS
from .state import SCOPE


def _eager_value(a):
    if a.__class__ is LazyArray:
        value = a._value
        return a.asnumpy() if value is None else value
    return a


def _xp_of(values):
    """numpy, unless a cupy array is already in play (cupy is never imported otherwise)."""
    for v in values:
        if v.__class__ is not np.ndarray and type(v).__module__.startswith("cupy"):
            import cupy
            return cupy
    return np


def eager(op: OpDef, operands, attrs):
    """Run one instance now (no scope active): the reference semantics batching must match.
    Where an operand carries a gradient (``lazyarray.grad.tape``), the result records the op;
    a view of a parameter is a parameter, as in a scope (one made before a scope is used in it)."""
    if op.alias is not None and operands[0].__class__ is LazyArray and operands[0]._ref < 0:
        derived = _scope._derived(op, operands, attrs)
        if derived is not None:
            return derived
    tracked = False
    if op.plain:
        values = []
        for a in operands:
            if a.__class__ is LazyArray:
                value = a._value
                values.append(a.asnumpy() if value is None else value)
                tracked = tracked or a._scope is not None and carries(a)
            else:
                values.append(a)
        flat = values
    else:
        values, flat = [], []
        for (name, kind), a in zip(op.operands, operands):
            if kind == ARRAY:
                values.append(_eager_value(a))
                flat.append(values[-1])
                tracked = tracked or carries(a)
            elif kind == ARRAYS:
                if isinstance(a, LazyArray):    # as a scope refuses it (its rows would be nodes)
                    raise TypeError(f"la.{op.name}: {name} must be a non-empty sequence of arrays")
                values.append([_eager_value(x) for x in a])
                flat.extend(values[-1])
                tracked = tracked or any(map(carries, a))
            elif kind == INDEX and isinstance(a, LazyArray):
                raise TypeError(f"la.{op.name}: indices must be integers, not a LazyArray")
            else:
                values.append(a)
    xp = _xp_of(flat)
    try:
        out = op.eager(xp, *values, **attrs)
    except (ValueError, TypeError) as error:       # numpy's AxisError too: a shape error
        shapes = ", ".join(str([np.shape(x) for x in v]) if isinstance(v, list) else str(np.shape(v))
                           for v in values)
        raise ShapeError(f"la.{op.name} with operand shapes {shapes}: {error}") from None
    except IndexError as error:
        raise IndexError(f"la.{op.name}: {error}") from None
    if out.__class__ is tuple:
        if tracked and GRAD.get():
            node = Node(op, _snapshot(operands), attrs, out)
            return tuple(LazyArray(Part(node, p), 0, -1, o) for p, o in enumerate(out))
        return tuple(LazyArray(None, 0, -1, o) for o in out)
    out = out if out.__class__ is xp.ndarray else xp.asarray(out)
    if tracked and GRAD.get() and out.dtype.kind in "fc":
        return LazyArray(Node(op, _snapshot(operands), attrs, out), 0, -1, out)
    return LazyArray(None, 0, -1, out)


def _snapshot(operands) -> tuple:
    """The operands a backward reads, numpy arrays copied: the caller may refill a buffer after
    the call (a scope copies them too, when it records the call)."""
    return tuple(a.copy() if a.__class__ is np.ndarray else
                 type(a)(x.copy() if x.__class__ is np.ndarray else x for x in a) if a.__class__ in (list, tuple) else a
                 for a in operands)


_scope.EAGER.append(eager)


def _parameters(op: OpDef) -> tuple[list[str], list[str], str]:
    positional = [name for name, _ in op.operands]
    keywords = [f"{name}={default!r}" for name, default in op.attrs]
    attrs = "{" + ", ".join(f"{name!r}: {name}" for name, _ in op.attrs) + "}"
    return positional, keywords, attrs


def _docstring(op: OpDef) -> str:
    kinds = {ARRAY: "array or scalar", ARRAYS: "sequence of arrays", INDEX: "integer(s), per-call data",
             ATTR: "static attribute"}
    lines = [op.doc, "", "Operands: " + ", ".join(f"{n} ({kinds[k]})" for n, k in op.operands) + "."]
    if op.attrs:
        lines.append("Attributes (part of the batching signature): " + ", ".join(n for n, _ in op.attrs) + ".")
    lines.append("Eager outside ``la.batching()``; recorded (and batched) inside one.")
    return "\n".join(lines)


def _fast_path(op: OpDef, call: str) -> str | None:
    """Source of the in-scope fast path: build the same key as ``Scope.record`` for the common
    operand forms (futures of this scope, parameters, Python scalars, numpy arrays, int indices)
    and append the node directly; anything else falls back to the generic path."""
    lines, keys, refs, aux, inputs, convert = [], ["_op"], [], None, [], []  # convert: r{i} == -2
    for i, (name, kind) in enumerate(op.operands):
        if kind == ARRAY:
            lines += [
                f"c = {name}.__class__",
                "if c is _LA:",
                f"    if {name}._scope is scope:",
                f"        k{i} = {name}._cls; r{i} = {name}._ref",
                f"    elif {name}._ref < 0:",
                f"        k{i} = {name}._ref; r{i} = -1",
                "    else:",                 # a value from outside, already an input node here
                f"        kn = scope._concrete.get(id({name}))",
                f"        if kn is None or kn[0] is not {name}:",
                f"            return {call}",
                f"        k{i} = kn[2]; r{i} = kn[1]",
                "elif c is int:",
                f"    k{i} = (c, {name}); r{i} = -1",
                "elif c is float:",          # zeros by sign, as Scope._operand keys them (a NaN's
                f"    k{i} = (c, {name}) if {name} else _skey({name}); r{i} = -1",  # key misses: generic)
                "elif c in _SCALARS:",       # numpy scalars (np.float32(0.5)), bools, complex
                f"    k{i} = _skey({name}); r{i} = -1",
                "elif c is _ND:",            # per-node data: an input node, once the entry is found
                f"    k{i} = _cid({name}.shape, {name}.dtype); r{i} = -2",
                "else:",
                f"    return {call}",
            ]
            keys.append(f"k{i}")
            refs.append(f"r{i}")
            convert.append(f"{name} = scope.input(_copy({name})); r{i} = {name}._ref")
        elif kind == ARRAYS:
            if len(op.operands) != 1:
                return None
            lines += [        # futures, parameters (la.concatenate([x, b])) and numpy data, keyed as
                f"if {name}.__class__ is not list and {name}.__class__ is not tuple:",  # Scope._operand keys
                f"    return {call}",   # them; iterating a LazyArray here would record a node per row
                "ks = []; rs = []; nd = None",
                f"for x in {name}:",
                "    c = x.__class__",
                "    if c is _LA:",
                "        if x._scope is scope:",
                "            ks.append(x._cls); rs.append(x._ref)",
                "        elif x._ref < 0:",
                "            ks.append(x._ref)",
                "        else:",
                f"            return {call}",
                "    elif c is _ND:",       # an input node, made once the entry is found
                "        ks.append(_cid(x.shape, x.dtype))",
                "        if nd is None: nd = []",
                "        nd.append((len(rs), x)); rs.append(-2)",
                "    else:",
                f"        return {call}",
                "if not rs:",               # parameters only: a constant, computed by the generic path
                f"    return {call}",
            ]
            keys.append("tuple(ks)")
            inputs += ["if nd is not None:", "    for j, x in nd:", "        rs[j] = scope.input(_copy(x))._ref"]
        elif kind == INDEX:     # numpy ints too (ids read from arrays), as ints, as Scope.record does
            lines += [f"if {name}.__class__ is not int:", f"    if {name}.__class__ not in _NPINTS:"]
            if len(refs) == 1 and i == 1:
                # a numpy array of ids into a parameter (a sentence's words in one lookup: E[ids]),
                # keyed by its shape as Scope.record keys it; nothing to fuse with a parameter
                key = ", ".join(keys + [f"{name}.shape"] + [_attr_key(n, d) for n, d in op.attrs])
                lines += [f"        if r0 != -1 or {name}.__class__ is not _ND or not {name}.ndim "
                          f"or {name}.dtype.kind not in 'iu':",
                          f"            return {call}",
                          "        try:", f"            e = scope.entries[({key},)]",
                          "        except (KeyError, TypeError):", f"            return {call}",
                          f"        iv = {name}.ravel().tolist()",
                          f"        if iv and not (-e[2] <= min(iv) and max(iv) < e[2]):", f"            return {call}",
                          "        return scope.append(e, (), iv)"]
            else:
                lines.append(f"        return {call}")
            lines.append(f"    {name} = int({name})")
            keys.append("()")
            aux = name
        else:
            keys.append(_attr_key(name))
    keys += [_attr_key(name, default) for name, default in op.attrs]
    if op.alias is not None and op.nout is None and len(refs) == 1:  # a view of a parameter: a parameter
        lines += [
            f"key = ({', '.join(keys)},)",
            "try:",
            "    e = scope.entries[key]",
            "except KeyError:",
            "    if r0 == -1:",
            "        d = _DERIVED.get(key)",
            "        if d is not None:",
            "            return d",
            f"    return {call}",
            "except TypeError:",
            f"    return {call}",
        ]
    else:
        lines += [
            "try:",
            f"    e = scope.entries[({', '.join(keys)},)]",
            "except (KeyError, TypeError):",
            f"    return {call}",
        ]
    if aux is not None and op.bound is not None:
        lines += [f"if not -e[2] <= {aux} < e[2]:", f"    return {call}"]
    names = [name for name, _ in op.operands]
    fuse = []
    if op.name in CONSUMERS:  # record-time fusion with the producer of a lone per-node operand
        if len(refs) not in (1, 2) or any(kind == ARRAYS for _, kind in op.operands):
            return None
        tail = f"({aux},)" if aux is not None else "()"
        lone = f"{names[1]} if r0 < 0 else {names[0]}" if len(refs) == 2 else names[0]
        fuse = _fuse_inline(lone, f"({', '.join(names)},)", tail, aux)
    # numpy operands (r == -2) become input nodes only now that the entry is known, and only
    # on the branches where some operand is not a future (the hot path pays nothing for them)
    if any(kind == ARRAYS for _, kind in op.operands):
        lines += [*inputs, *_append_inline("rs")]
    elif aux is not None and len(refs) == 1:
        lines += ["if r0 < 0:", "    if r0 != -2:", *("        " + line for line in _append_inline([], aux)),
                  "    " + convert[0], *fuse, *_append_inline(["r0"], aux)]
    elif len(refs) == 1:
        lines += ["if r0 < 0:", "    if r0 != -2:", f"        return {call}", "    " + convert[0], *fuse,
                  *_append_inline(["r0"])]
    elif len(refs) == 2:
        both = ["if r0 >= 0 and r1 >= 0:", *("    " + line for line in _append_inline(["r0", "r1"]))]
        lines += [*both, "if r0 == -2:", "    " + convert[0], "if r1 == -2:", "    " + convert[1], *both,
                  "if r0 < 0 and r1 < 0:", f"    return {call}", *fuse, "r0 = r1 if r0 < 0 else r0",
                  *_append_inline(["r0"])]
    else:
        lines += [line for i, c in enumerate(convert) for line in (f"if r{i} == -2:", "    " + c)]
        lines.append(f"return scope.append(e, [r for r in ({', '.join(refs)},) if r >= 0], ())")
    return "\n".join("    " + line for line in lines)


def _eager_path(op: OpDef, call: str) -> str:
    """Source of the eager fast path: numpy values that carry no gradient (or none is wanted:
    ``la.no_grad``) go straight to the kernel, a wrapper of ~0.2 µs where ``eager`` costs ~1 µs;
    anything else (cupy, gradients, views of parameters, errors to word) takes ``eager``."""
    lines, values = [], []
    for i, (name, kind) in enumerate(op.operands):
        # a parameter's view is a parameter (``_scope._derived``): only plain values take this path
        grad = f"{name}._scope is not None" if op.alias is not None and i == 0 else \
            f"{name}._scope is not None and _grad()"
        if kind == ARRAY:
            lines += [f"c = {name}.__class__",
                      "if c is _LA:",
                      f"    v{i} = {name}._value",
                      f"    if v{i}.__class__ is not _ND or {grad}:",
                      f"        return {call}",
                      "elif c is _ND or c is float or c is int:",
                      f"    v{i} = {name}",
                      "else:",
                      f"    return {call}"]
        elif kind == ARRAYS:
            lines += [f"if {name}.__class__ is not list and {name}.__class__ is not tuple:",
                      f"    return {call}",
                      f"v{i} = []",
                      f"for a in {name}:",
                      "    if a.__class__ is _LA:",
                      "        v = a._value",
                      "        if v.__class__ is not _ND or a._scope is not None and _grad():",
                      f"            return {call}",
                      f"        v{i}.append(v)",
                      "    elif a.__class__ is _ND:",
                      f"        v{i}.append(a)",
                      "    else:",
                      f"        return {call}",
                      f"if not v{i}:",
                      f"    return {call}"]
        elif kind == INDEX:
            lines += [f"if {name}.__class__ is _LA:", f"    return {call}", f"v{i} = {name}"]
        else:
            lines.append(f"v{i} = {name}")
        values.append(f"v{i}")
    values += [name if op.numpy else f"{name}={name}" for name, _ in op.attrs]   # numpy's own, positional
    lines += ["try:",
              f"    out = _kernel({'' if op.numpy else '_np, '}{', '.join(values)})",
              "except (ValueError, TypeError, IndexError):",    # worded by ``eager``, which raises them again
              f"    return {call}",
              "if out.__class__ is not _ND:",
              "    if out.__class__ is tuple:",
              "        return _concretes(out)",
              "    out = _asarray(out)",
              _CONCRETE_OUT, "return h"]
    return "\n".join("        " + line for line in lines)


#: source that makes ``h``, a concrete handle of ``out`` (cheaper than calling the class: see handle_source)
_CONCRETE_OUT = "h = _new(_LA); h._scope = None; h._ref = 0; h._cls = -1; h._value = out"


def _concretes(values) -> tuple:
    return tuple(map(_concrete, values))


def _fuse_inline(lone: str, operands: str, tail: str, aux: str | None) -> list[str]:
    """``Scope.fuse`` written out where its pair of signatures was seen before (every call but
    the first): a method call and a ``future`` call cost more than the rest of the stub."""
    return [f"lo = {lone}",
            "g = scope._sig",
            "last = len(g) - 1",
            f"if lo._ref == last << {PART_BITS} and last >= scope.done:",
            "    fk = (g[last], e[0])",
            "    fu = scope.fusions.get(fk, _MISS)",
            "    if fu is _MISS:",      # first seen: Scope.fuse finds the rule (or None) and keeps it
            f"        f = scope.fuse(e, lo, {operands}, {tail})",
            "        if f is not None:",
            "            return f",
            "    elif fu is not None:",
            "        d = _new(_DETACHED); d.scope = scope; d.entry = (fk[0], lo._cls, None, 0); "
            "d.offset = len(scope._ins) - fu[1]",
            "        lo._scope = d",
            "        g[last] = fu[0][0]",
            *([f"        scope._ins.append({aux})"] if aux is not None else []),
            "        " + handle_source("h", "scope", "lo._ref", "fu[0][1]"),
            "        return h"]


def _attr_key(name: str, default=None) -> str:
    """Source of an attribute's key part, as ``scope._hashable`` makes it (ints and None as they
    are, bools as keys of their own: ``axis=True`` or ``axis=1.0`` must not find the entry of
    ``axis=1``), the attribute's usual values tested first."""
    if default.__class__ is bool:
        return f"(_FK if {name} is False else _TK if {name} is True else _hashable({name}))"
    return f"({name} if {name} is None or {name}.__class__ is int else _hashable({name}))"


def _append_inline(refs: list[str] | str, aux: str | None = None) -> list[str]:
    """``Scope.append`` written out for up to two node inputs and one integer, or the inputs of
    a non-empty list named ``refs`` (a join's): the hot path of recording, where a method call
    would be an eighth of the cost of a call (a third of a concatenate's). Slots go in by
    ``fromlist`` (an ``array`` extends from a tuple item by item, at 2.5x the cost)."""
    lines = ["g = scope._sig", "nid = len(g)", "g.append(e[0])", "dp = scope._depth"]
    if isinstance(refs, str):
        lines += ["d = 0", f"for r in {refs}:", f"    t = dp[r >> {PART_BITS}]", "    if t > d:", "        d = t",
                  "dp.append(d + 1)", f"scope._ins.fromlist({refs})"]
    elif not refs:
        lines += ["dp.append(0)", f"scope._ins.append({aux})"]
    elif len(refs) == 1:
        lines += [f"dp.append(dp[{refs[0]} >> {PART_BITS}] + 1)",
                  f"scope._ins.append({refs[0]})" if aux is None else f"scope._ins.fromlist([{refs[0]}, {aux}])"]
    else:
        lines += [f"d0 = dp[{refs[0]} >> {PART_BITS}]", f"d1 = dp[{refs[1]} >> {PART_BITS}]",
                  "dp.append((d0 if d0 > d1 else d1) + 1)", f"scope._ins.fromlist([{refs[0]}, {refs[1]}])"]
    return lines + ["if e[3]:", f"    return _parts(scope, nid << {PART_BITS}, e[1])",
                    handle_source("h", "scope", f"nid << {PART_BITS}", "e[1]"), "return h"]


# numpy's method parameters, in its order (what np.sum(x) and friends pass)
REDUCTION_METHODS = {"sum": ("axis", "dtype", "out", "keepdims"), "mean": ("axis", "dtype", "out", "keepdims"),
                     "max": ("axis", "out", "keepdims")}


def _refuse_numpy_params(name, **given):
    names = sorted(k for k, v in given.items() if v is not None)
    raise TypeError(f"LazyArray.{name}: {', '.join(names)} not supported (lazyarray reductions "
                    "take axis and keepdims)")


def _index(x, idx):
    """``x[idx]`` past its eager fast path (``INDEX``): integers are per-call data (one gather
    for the batch), basic indices static."""
    single = idx.__class__ is int or idx.__class__ is IndexArg or (
        isinstance(idx, (int, np.integer)) and not isinstance(idx, bool))
    if single or isinstance(idx, (list, np.ndarray)):
        if x._cls in RANK0 or x._cls < 0 and not x._value.shape:  # as numpy; la.take(x, 0, axis=0) takes it
            raise IndexError("too many indices for array: array is 0-dimensional, but 1 were indexed")
        if not single and (idx.dtype if idx.__class__ is np.ndarray else np.asarray(idx).dtype).kind == "b":
            # numpy masks with it; la.take would read True/False as rows 1/0 (eager did, silently)
            raise TypeError("x[mask]: boolean masks are not supported (the result's shape would depend "
                            "on the data); use la.where, or integer indices")
        return _take(x, idx, 0)
    return _getitem(x, basic_index(idx))     # a TypeError here, as numpy raises for bad indices


_MISS = object()    # a pair of signatures whose fusion was not looked for yet
#: what the stubs' source reads besides ``_op`` and ``_kernel`` (their operator and its eager kernel)
SHARED = {"_current": SCOPE.get, "_eager": eager, "_LA": LazyArray, "_new": object.__new__,
          "_parts": _scope.parts, "_hashable": _scope._hashable, "_TK": _scope.TRUE_KEY, "_FK": _scope.FALSE_KEY,
          "_skey": scalar_key, "_ND": np.ndarray, "_cid": class_id, "_copy": np.array,
          "_NPINTS": NUMPY_INTS, "_SCALARS": NUMPY_SCALARS | {bool, complex}, "_refuse": _refuse_numpy_params,
          "_DERIVED": _scope.DERIVED, "_MISS": _MISS, "_DETACHED": Detached, "_np": np, "_grad": GRAD.get,
          "_asarray": np.asarray, "_concretes": _concretes,
          "_SCOPEVAR": SCOPE, "_GRADVAR": GRAD, "_index": _index}    # what the compiled stubs read for _current(), _grad()
SOURCES: list[tuple[str, str, str]] = []    # (stub name, operator name, source): what _recorders.pyx compiles
PURE: dict = {}                             # stub name -> the stub run as Python (the differential tests)
STALE: list[str] = []                       # stubs without a compiled form that is current
_COMPILED = recorders.load(SHARED, LazyArray, _scope.Scope)
#: forcing as Python (the pure path, and the differential tests' reference); compiled where current
PURE_FORCING = {name: LazyArray.__dict__[name] for name in ("_raw", "asnumpy", "__array__", "item", "__float__",
                                                            "__int__", "__bool__")} | {"Executor.value": Executor.value}
if _COMPILED is not None and _COMPILED.KEYS.get(recorders.FORCING_KEY) == recorders.key(recorders.FORCING):
    _COMPILED.bind({"_to_numpy": _to_numpy, "_pure_array": PURE_FORCING["__array__"]}, LazyArray, _scope.Scope)
    for _name, _fn in _COMPILED.METHODS.items():
        setattr(LazyArray, _name, _fn)
    Executor.value = _COMPILED.executor_value
elif _COMPILED is not None:
    STALE.append(recorders.FORCING_KEY)


def _stub(name: str, op_name: str, src: str, own: dict):
    """Function ``op_name`` of ``src`` (a stub's source, reading ``SHARED`` and ``own``), compiled
    where its compiled form is current, else run as Python; the source goes to _recorders.pyx."""
    namespace = {**SHARED, **own}
    exec(compile(src, f"<lazyarray.{op_name}>", "exec"), namespace)
    SOURCES.append((name, op_name, src))
    PURE[name] = fn = namespace[op_name]
    if _COMPILED is not None and _COMPILED.KEYS.get(name) == recorders.key(src):
        _COMPILED.bind({f"{k}_{op_name}": v for k, v in own.items()}, LazyArray, _scope.Scope)
        return getattr(_COMPILED, f"s_{name}")
    STALE.append(name)
    return fn


def _generate(op: OpDef, numpy_params=()):
    """The stub of ``op``; with ``numpy_params``, the method form that takes numpy's method
    parameters in numpy's order (``np.sum(x)`` calls ``x.sum(axis=None, dtype=None, out=None)``),
    refusing by name those it cannot honour unless they are None."""
    positional, keywords, attrs = _parameters(op)
    args = "".join(p + ", " for p in positional)
    call = f"scope.record(_op, ({args}), {attrs})"
    check = ""
    if numpy_params:
        defaults = dict(op.attrs)
        unused = [p for p in numpy_params if p not in defaults]
        keywords = [f"{p}={defaults[p]!r}" if p in defaults else f"{p}=None" for p in numpy_params]
        check = (f"    if {' or '.join(f'{p} is not None' for p in unused)}:\n"   # (**kwargs: a dict per call)
                 f"        _refuse({op.name!r}, {''.join(f'{p}={p}, ' for p in unused)})\n")
    src = (f"def {op.name}({', '.join(positional + keywords)}):\n"
           f"{check}"
           "    scope = _current()\n"
           "    if scope is None:\n"
           f"{_eager_path(op, f'_eager(_op, ({args}), {attrs})')}\n"
           f"{_fast_path(op, call)}\n")
    name = f"{op.name}_numpy" if numpy_params else op.name
    kernel = getattr(np, op.numpy) if op.numpy else op.eager     # the eager path's (see _eager_path)
    fn = _stub(name, op.name, src, {"_op": op, "_kernel": kernel})
    fn.__doc__ = _docstring(op)
    fn.__module__ = "lazyarray"
    fn.__qualname__ = op.name
    return fn


FUNCTIONS = {name: _generate(op) for name, op in REGISTRY.items()}
for _op in REGISTRY.values():
    for _alias in _op.aliases:
        FUNCTIONS[_alias] = FUNCTIONS[_op.name]
# this module's names too, but not over the builtins its own code calls (any, all, min, sum...)
globals().update({_name: _fn for _name, _fn in FUNCTIONS.items() if not hasattr(builtins, _name)})


def _reflected(op: OpDef):
    """``op``'s reflected operator (``1 - x``): a stub that calls ``op``'s with the operands
    swapped (``_kernel`` here), compiled too: as a Python closure it cost ~0.1 µs more a call."""
    name = f"reflected_{op.name}"
    fn = _stub(name, name, f"def {name}(self, other):\n    return _kernel(other, self)\n",
               {"_kernel": FUNCTIONS[op.name]})
    fn.__doc__ = FUNCTIONS[op.name].__doc__
    return fn


for _op in REGISTRY.values():
    for _name in _op.methods:
        setattr(LazyArray, _name, FUNCTIONS[_op.name])
    if _op.reflected:
        _fn = _reflected(_op)
        for _name in _op.reflected:
            setattr(LazyArray, _name, _fn)


_take, _getitem = FUNCTIONS["take"], FUNCTIONS["getitem"]
#: ``LazyArray.__getitem__``: an int into a numpy value that wants no gradient (eager ``E[w]``,
#: ``z[label]``) is a copy of its row here, ~0.2 µs compiled; the rest is ``_index``. Never a
#: view (~0.09 µs less): it would alias the parameter, and an optimizer's in-place update would
#: change a value already handed out (a scope's gather never does), or one a backward reads.
INDEX = f'''\
def index(x, idx):
    if idx.__class__ is int and _current() is None:
        v = x._value
        if v.__class__ is _ND and (x._scope is None or not _grad()):
            try:
                out = v[idx, ...].copy()    # a copy, as la.take's; 0-d from a vector
            except IndexError:              # out of range, or a 0-d value
                return _index(x, idx)       # worded by la.take, or as numpy
            {_CONCRETE_OUT}
            return h
    return _index(x, idx)
'''
index = _stub("index", "index", INDEX, {})


def _reshape(self, *shape):
    return FUNCTIONS["reshape"](self, shape[0] if len(shape) == 1 else shape)


def _transpose(self, *axes):
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0] or ()     # x.transpose(None) reverses, as numpy's (np.transpose(x) calls it)
    return FUNCTIONS["transpose"](self, tuple(axes) if axes else None)


for _name, _params in REDUCTION_METHODS.items():
    setattr(LazyArray, _name, _generate(REGISTRY[_name], _params))
#: whether the recording stubs run compiled (``lazyarray.recorders``), as ``la.compiled`` says
COMPILED = _COMPILED is not None and not STALE
if _COMPILED is not None and STALE:
    warnings.warn(f"lazyarray: {len(STALE)} recording stubs changed since lazyarray._recorders was built "
                  f"({', '.join(STALE[:3])}...): they run as Python; rebuild with pip install -e .", stacklevel=2)
LazyArray.__getitem__ = index
LazyArray.reshape = _reshape
LazyArray.transpose = _transpose
LazyArray.T = property(FUNCTIONS["transpose"])
