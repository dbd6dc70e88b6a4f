"""Recording state per context: the innermost active scope (None: eager mode). A thread, an
asyncio task and a greenlet each have a contextvars context of their own, so tasks that hold a
scope across an ``await`` never record into each other's. Each scope links the one it was
entered in (``Scope._outer``): entering or leaving is one ``set``."""
from __future__ import annotations

import contextvars

SCOPE: contextvars.ContextVar = contextvars.ContextVar("lazyarray_scope", default=None)
# set in the importing context: CPython caches a variable's value where it finds it set, never
# its default, so every eager op's lookup searched the context's HAMT (~2% of eager Tree-FC)
SCOPE.set(None)
