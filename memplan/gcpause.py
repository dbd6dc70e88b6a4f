"""Pausing Python's cyclic garbage collector while a plan builds many small linked objects.

Every few hundred allocations the collector scans the young generation, and a PQ tree is
nothing but young, linked, long-lived objects: with it running, building and journaling the
tree costs two to three times as much.  Nothing here needs it; the pause ends with the call.

Threads share the collector: a pause is one of a set, the collector is disabled while the set
is not empty and enabled again (if it was enabled before the first) when it empties. Each
thread reading ``gc.isenabled()`` for itself left it disabled for good when a second pause
began before the first ended and disabled it after the first had enabled it again.
"""

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_pauses: set = set()
_was_enabled = [True]


def _release(token):
    """Idempotent: running it again finishes what an interrupt cut short."""
    with _lock:
        _pauses.discard(token)
        if not _pauses and _was_enabled[0]:
            gc.enable()


@contextmanager
def paused_gc():
    token = object()
    try:
        try:
            with _lock:
                if not _pauses:
                    _was_enabled[0] = gc.isenabled()
                _pauses.add(token)
                gc.disable()
            yield
        finally:
            _release(token)
    finally:
        _release(token)     # again, where an interrupt cut the first short
