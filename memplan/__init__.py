"""Memory planning for batched execution: where each variable lives so that batch operands are
contiguous and aligned (ED-Batch §3).  Pure algorithm over ints; no array backend."""

from .layout import Layout, layout
from .pqtree import PQTree

__all__ = ["Layout", "PQTree", "layout"]
