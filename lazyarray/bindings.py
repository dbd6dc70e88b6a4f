"""Where a traced cell body found its parameters inside objects (``P.W``, ``P.layers[0].W``,
``P.by_name["W"]``), so that rebinding one (``P.W = la.parameter(new)``, a functional update)
is seen instead of the trace running the old weights.

A trace is keyed by the identity of the objects it reads (static arguments, closed-over and
global bundles), not by their contents: reading every attribute at every call would cost more
than recording it. So the paths from those objects to the parameters the body used are found
once, at trace time, and checked where it is cheap: when a call misses its recorder's memo
(the first call of a scope) and before a flush runs the recorded calls.
"""
from __future__ import annotations

import types
import weakref

from .array import PARAM_NAMES, LazyArray

#: How deep (attribute of attribute ...) and how many objects a search looks through per root.
DEPTH, BREADTH = 4, 4096
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           str, bytes, int, float, complex, bool, type(None))


def _children(obj):
    """(step, value) pairs one level below ``obj``: attributes, list/tuple items, dict values."""
    c = obj.__class__
    if c is list or c is tuple:
        return [(("item", i), v) for i, v in enumerate(obj)]
    if c is dict:
        return [(("item", k), v) for k, v in obj.items() if k.__class__ in (str, int)]
    out = [(("attr", k), v) for k, v in getattr(obj, "__dict__", {}).items()]
    for klass in c.__mro__:
        for k in getattr(klass, "__slots__", ()):
            if k not in ("__dict__", "__weakref__") and hasattr(obj, k):
                out.append((("attr", k), getattr(obj, k)))
    return out


def _paths(root, wanted: set):
    """Paths from ``root`` to the parameters (refs in ``wanted``) it holds, breadth first."""
    found, seen, level = [], {id(root)}, [((), root)]
    budget = BREADTH
    for _ in range(DEPTH):
        below = []
        for path, obj in level:
            for step, v in _children(obj):
                if v.__class__ is LazyArray:
                    if v._ref in wanted:
                        found.append((path + (step,), v._ref))
                elif id(v) not in seen and not isinstance(v, _OPAQUE) and budget > 0:
                    seen.add(id(v))
                    budget -= 1
                    below.append((path + (step,), v))
        level = below
    return found


def _hold(obj):
    """A weak reference where the object has them (the bindings must not keep a dropped model
    alive in the signature table), else a function returning the object itself."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


def find(roots, wanted: set) -> tuple:
    """Bindings of a trace: (held root, path, parameter ref) for every parameter in ``wanted``
    reachable from ``roots`` (objects the trace is keyed on by identity)."""
    out = []
    for root in roots:
        if isinstance(root, _OPAQUE) or root.__class__ is LazyArray:
            continue
        for path, ref in _paths(root, wanted):
            out.append((_hold(root), path, ref))
    return tuple(out)


def _follow(obj, path):
    for kind, key in path:
        try:
            obj = getattr(obj, key) if kind == "attr" else obj[key]
        except (AttributeError, LookupError, TypeError):
            return None
    return obj


def stale(bindings):
    """(root object, described path) of the first binding that now holds another value, or None."""
    for held, path, ref in bindings:
        root = held()
        if root is None:
            continue
        now = _follow(root, path)
        if now.__class__ is not LazyArray or now._ref != ref:
            return root, describe(root, path, ref)
    return None


def describe(root, path, ref) -> str:
    where = type(root).__name__ + "".join(f".{k}" if kind == "attr" else f"[{k!r}]" for kind, k in path)
    return f"{where} (parameter {PARAM_NAMES.get(-ref, ref)} when traced)"
