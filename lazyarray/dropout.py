"""``la.dropout``: inverted dropout whose masks hash a key drawn from ``lazyarray.keys``."""
from __future__ import annotations

from ops_registry import REGISTRY

from .keys import draw
from .ops import FUNCTIONS

_raw = FUNCTIONS["dropout"]


def dropout(x, rate=0.5):
    if rate == 0:
        return x
    return _raw(x, draw(1)[0], rate)


dropout.__doc__ = REGISTRY["dropout"].doc + """

``la.dropout(x, rate=0.5)``: the key is the next of ``la.manual_seed``'s stream; ``rate=0``
returns ``x`` itself (evaluation). Eager outside ``la.batching()``; recorded inside one."""
