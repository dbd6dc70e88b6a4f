"""Pausing Python's cyclic garbage collector while a plan builds many small linked objects.

Every few hundred allocations the collector scans the young generation, and a PQ tree is
nothing but young, linked, long-lived objects: with it running, building and journaling the
tree costs two to three times as much.  Nothing here needs it; the pause ends with the call.
"""

import gc
from contextlib import contextmanager


@contextmanager
def paused_gc():
    """An interrupt anywhere leaves the collector as it was: it is disabled inside the ``try``,
    and the outer ``finally`` enables it again where an interrupt cut the inner one short."""
    was_enabled = gc.isenabled()
    try:
        try:
            gc.disable()
            yield
        finally:
            if was_enabled:
                gc.enable()
    finally:
        if was_enabled:
            gc.enable()
