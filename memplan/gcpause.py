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
import weakref

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


class paused_gc:
    """``with paused_gc():`` the collector is off. A pause ends at ``__exit__``, and, where an
    interrupt kept ``__exit__`` from running its first line, when the object is dropped (a
    weak reference's callback); a generator's pause cut off that way lasted until the generator
    was collected, by the collector it had disabled."""

    __slots__ = ("token", "__weakref__")

    def __enter__(self):
        self.token = token = object()
        weakref.finalize(self, _release, token)
        try:
            with _lock:
                if not _pauses:
                    _was_enabled[0] = gc.isenabled()
                _pauses.add(token)
                gc.disable()
        except BaseException:       # an interrupt after the collector went off: it comes back on
            _release(token)
            raise
        return self

    def __exit__(self, *exc):
        try:
            _release(self.token)
        finally:
            _release(self.token)    # again, where an interrupt cut the first short
