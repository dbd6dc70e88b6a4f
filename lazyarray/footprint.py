"""Bytes an interned signature keeps alive: its key, its payload and, for a cell, the traced
plan with its generated code. The process-wide signature table is bounded by the sum of these
(``scope._Signatures``), so that a program minting a new signature per scope (an annealed
constant, a new cell trace) holds a known amount of memory, not a known count of entries."""
from __future__ import annotations

import sys
import types

import numpy as np

from ops_registry import OpDef

_LEAVES = (str, bytes, int, float, complex, bool, type(None), np.dtype)
_SKIP = (type, types.ModuleType, types.BuiltinFunctionType, np.ufunc, OpDef)    # process-wide, shared
#: a signature's slots in the table's dicts and lists (ids, entries, five lists, fusions)
ENTRY = 400


_ARRAY = 112    # an array's header: its data is a parameter's (bounded on its own, see _Signatures)


def footprint(*roots) -> int:
    """Bytes of the objects reachable from ``roots`` (each counted once), stopping at modules,
    classes and builtins, at LazyArrays, at other signatures' payloads (a traced body's ops are
    signatures of their own), and at arrays' data: the arrays a signature holds are parameters'
    values (bounded on their own) and a traced body's placeholders."""
    from .array import LazyArray
    from .cell import Cell
    from .scope import Payload
    seen: set = set()
    total, stack = ENTRY, list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SKIP) or isinstance(obj, Cell):
            continue
        if obj.__class__ is Payload and not any(obj is r for r in roots):
            continue        # a traced body's own ops: signatures of their own, counted as such
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            total += _ARRAY
            continue
        total += sys.getsizeof(obj, 64)
        if isinstance(obj, _LEAVES):
            continue
        if obj.__class__ is LazyArray:
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif isinstance(obj, types.FunctionType):
            if obj.__globals__.get("__name__") is not None:     # a module's: shared, not the signature's
                total -= sys.getsizeof(obj, 64)
                continue
            stack.extend((obj.__code__, obj.__closure__ or (), obj.__defaults__ or (), obj.__globals__))
        elif isinstance(obj, types.CodeType):
            stack.extend(obj.co_consts)
        elif isinstance(obj, types.CellType):
            try:
                stack.append(obj.cell_contents)
            except ValueError:
                pass
        else:
            stack.extend(getattr(obj, "__dict__", {}).values())
            for klass in type(obj).__mro__:
                for name in getattr(klass, "__slots__", ()):
                    value = getattr(obj, name, None)
                    if value is not None:
                        stack.append(value)
    return total
