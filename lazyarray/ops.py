"""The numpy-like functions, ``LazyArray`` methods and operators, generated from
``ops_registry``: each stub runs the eager kernel outside a scope and records inside one.

Stubs are generated as source (not closures over ``*args``) so that a call costs what a
hand-written function would: fixed parameters, no argument packing beyond one tuple.
"""
from __future__ import annotations

import numpy as np

from ops_registry import ARRAY, ARRAYS, ATTR, INDEX, REGISTRY, OpDef, ShapeError

from .array import LazyArray
from .scope import _tls


def _eager_value(a):
    if isinstance(a, LazyArray):
        return a.asnumpy() if a._value is None else a._value
    return a


def _xp_of(values):
    for v in values:
        if type(v).__module__.startswith("cupy"):
            import cupy  # only when cupy values are already in play
            return cupy
    return np


def eager(op: OpDef, operands, attrs):
    """Run one instance now (no scope active): the reference semantics batching must match."""
    values = []
    for (name, kind), a in zip(op.operands, operands):
        if kind == ARRAY:
            values.append(_eager_value(a))
        elif kind == ARRAYS:
            values.append([_eager_value(x) for x in a])
        elif kind == INDEX and isinstance(a, LazyArray):
            raise TypeError(f"la.{op.name}: indices must be integers, not a LazyArray")
        else:
            values.append(a)
    xp = _xp_of(v for v in values if not isinstance(v, list))
    try:
        with np.errstate(all="ignore") if op.elementwise else _NOOP:
            out = op.eager(xp, *values, **attrs)
    except IndexError as error:
        raise IndexError(f"la.{op.name}: {error}") from None
    except (ValueError, TypeError) as error:
        shapes = ", ".join(str(np.shape(v)) if not isinstance(v, list) else str([np.shape(x) for x in v])
                           for v in values)
        raise ShapeError(f"la.{op.name} with operand shapes {shapes}: {error}") from None
    if isinstance(out, tuple):
        return tuple(LazyArray(None, 0, -1, o) for o in out)
    return LazyArray(None, 0, -1, out if isinstance(out, xp.ndarray) else xp.asarray(out))


class _NoOp:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NOOP = _NoOp()


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


_TEMPLATE = '''
def {name}({params}):
    scope = _tls.scope
    if scope is None:
        return _eager(_op, ({args}), {attrs})
    return scope.record(_op, ({args}), {attrs})
'''


def _generate(op: OpDef):
    positional, keywords, attrs = _parameters(op)
    src = _TEMPLATE.format(name=op.name, params=", ".join(positional + keywords),
                           args="".join(p + ", " for p in positional), attrs=attrs)
    namespace = {"_tls": _tls, "_eager": eager, "_op": op}
    exec(compile(src, f"<lazyarray.{op.name}>", "exec"), namespace)
    fn = namespace[op.name]
    fn.__doc__ = _docstring(op)
    fn.__module__ = "lazyarray"
    fn.__qualname__ = op.name
    return fn


FUNCTIONS = {name: _generate(op) for name, op in REGISTRY.items()}
globals().update(FUNCTIONS)
for _op in REGISTRY.values():
    for _alias in _op.aliases:
        FUNCTIONS[_alias] = FUNCTIONS[_op.name]
        globals()[_alias] = FUNCTIONS[_op.name]


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    method.__doc__ = fn.__doc__
    return method


def _reflected(fn):
    def method(self, other):
        return fn(other, self)

    method.__doc__ = fn.__doc__
    return method


for _op in REGISTRY.values():
    for _name in _op.methods:
        setattr(LazyArray, _name, _method(FUNCTIONS[_op.name]))
    for _name in _op.reflected:
        setattr(LazyArray, _name, _reflected(FUNCTIONS[_op.name]))


def index(x, idx):
    """``x[idx]``: integers are per-call data (one gather for the batch), basic indices static."""
    if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
        return FUNCTIONS["take"](x, idx)
    if isinstance(idx, (list, np.ndarray)):
        return FUNCTIONS["take"](x, idx)
    parts = idx if isinstance(idx, tuple) else (idx,)
    for p in parts:
        if not (p is None or p is Ellipsis or isinstance(p, (slice, int, np.integer))):
            raise TypeError(f"LazyArray indices must be integers, slices, None or Ellipsis, got "
                            f"{type(p).__name__}; use la.take or la.pick for gathers")
    return FUNCTIONS["getitem"](x, parts)
