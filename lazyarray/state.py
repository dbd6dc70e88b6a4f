"""Per-thread recording state: the innermost active scope (None means eager mode)."""
from __future__ import annotations

import threading


class _Local(threading.local):
    scope = None
    stack = ()


tls = _Local()
