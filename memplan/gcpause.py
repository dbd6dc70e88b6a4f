"""Pausing Python's cyclic garbage collector while a plan builds many small linked objects.

Every few hundred allocations the collector scans the young generation, and a PQ tree is
nothing but young, linked, long-lived objects: with it running, building and journaling the
tree costs two to three times as much.  Nothing here needs it; the pause ends with the call.

Threads share the collector: a pause is one of a set, the collector is off while the set is
not empty and on again (if it was on before the first) when it empties. Each thread reading
``gc.isenabled()`` for itself left it off for good when a second pause began before the first
ended and disabled it after the first had enabled it again (the soak test found it).
"""

import gc
import threading

_lock = threading.Lock()
_pauses: set = set()
_was_enabled = [True]
_owed = [False]     # the last pause ended: the collector is to be enabled (even if cut short)


def _release(token):
    """Idempotent, and a second call finishes what an interrupt cut short."""
    with _lock:
        if token in _pauses:
            if len(_pauses) == 1 and _was_enabled[0]:
                _owed[0] = True
            _pauses.discard(token)
        if _owed[0] and not _pauses:
            gc.enable()
            _owed[0] = False


def paused_gc(fn, *args):
    """``fn(*args)`` with the collector off. A function, not a context manager: CPython raises a
    signal's exception at a function's start, and one raised at the start of ``__exit__`` skipped
    the whole release; the pause then ended only when the manager was dropped, never where the
    exception was kept in a reference cycle, which only the collector it had turned off frees
    (the soak test). Here the release is this frame's own ``finally``, run twice against an
    interrupt at its call."""
    token = object()
    try:
        try:
            with _lock:
                if not _pauses:
                    _was_enabled[0] = gc.isenabled()
                _pauses.add(token)
                gc.disable()
            return fn(*args)
        finally:
            _release(token)
    finally:
        _release(token)
