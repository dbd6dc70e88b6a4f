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
_state = {"open": 0, "saved": None}


def hold():
    """A scope opens."""
    with _lock:
        if not _state["open"]:
            saved = _state["saved"] = gc.get_threshold()
            gc.set_threshold(max(saved[0], YOUNG), *saved[1:])
        _state["open"] += 1


def release():
    """A scope that called ``hold`` leaves."""
    with _lock:
        _state["open"] -= 1
        if not _state["open"]:
            gc.set_threshold(*_state["saved"])
