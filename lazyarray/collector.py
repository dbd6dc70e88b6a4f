"""Python's cyclic garbage collector while scopes are open. Recording makes many small, linked,
long-lived objects (handles, node lists, cell memos); with the default thresholds (a young
collection every 700 allocations, older ones every 10 of those) the collector scans them again
and again: op-level BiLSTM recording (H=256, 64 sentences) took 73-85 ms a scope with them,
~30 ms without. While any scope is open, a young collection runs every ``YOUNG`` allocations
instead: garbage is still collected, less often. Process-wide, as the thresholds are: scopes of
every thread share one setting, and the thresholds in force when the first of them opened come
back when the last one leaves."""
from __future__ import annotations

import gc
import threading

YOUNG = 100_000

_lock = threading.Lock()
_holders: set = set()       # ids of the scopes open now
_saved: list = []           # the thresholds before the first of them opened


def hold(scope):
    """``scope`` opens."""
    with _lock:
        if not _saved:
            saved = gc.get_threshold()
            _saved.append(saved)
            gc.set_threshold(max(saved[0], YOUNG), *saved[1:])
        _holders.add(id(scope))


def release(scope):
    """``scope`` leaves. Idempotent, and finishes what a call cut short by an interrupt left
    undone: running it again restores the thresholds once no scope holds them."""
    with _lock:
        _holders.discard(id(scope))
        if not _holders and _saved:
            gc.set_threshold(*_saved[0])
            _saved.clear()
