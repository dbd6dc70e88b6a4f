"""Pausing Python's cyclic garbage collector while a plan builds many small linked objects.

Every few hundred allocations the collector scans the young generation, and a PQ tree is
nothing but young, linked, long-lived objects: with it running, building and journaling the
tree costs two to three times as much.  Nothing here needs it; the pause ends with the call.
"""

import gc
from contextlib import contextmanager


@contextmanager
def paused_gc():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
