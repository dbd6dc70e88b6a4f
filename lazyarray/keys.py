"""The stream of keys that dropout masks hash (``la.manual_seed``). Every draw takes the next
keys in program order, eagerly and while recording alike, so a seed gives the same masks with
and without batching. In a traced cell body the keys are per-call data: placeholders there,
and each recorded call of the cell draws as many real keys as its body took."""
from __future__ import annotations

import itertools
import threading

from ops_registry.random import mix

from .cell import IndexArg
from .state import SCOPE

_lock = threading.Lock()
_stream = [0, itertools.count()]     # seed, keys drawn so far


def manual_seed(seed: int):
    """Restart the stream: the dropout calls after it draw the same masks on every run."""
    with _lock:
        _stream[:] = [int(seed), itertools.count()]


def draw(k: int) -> list:
    """``k`` keys: the stream's next ones, or in a traced cell body the placeholders of the keys
    each call of the cell will draw (integer arguments of the trace, after its own)."""
    scope = SCOPE.get()
    if scope is not None and scope.tracing is not None:
        first = scope.first_key + scope.keys
        scope.keys += k
        return [IndexArg(first + j, "(a dropout key)") for j in range(k)]
    with _lock:
        seed, count = _stream
        return [mix((seed << 32) + next(count)) for _ in range(k)]


def call_keys(k: int) -> list:
    """The ``k`` keys of a recorded cell call, as its integer arguments: in a traced body (a
    cell calling a cell), the placeholders' sentinels, which each call of the enclosing cell
    replaces with the keys it draws."""
    return [a.sentinel if a.__class__ is IndexArg else a for a in draw(k)]
