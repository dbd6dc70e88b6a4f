"""What a scope did: sizes, batches, kernels, copies, time per phase; and ``explain``."""
from __future__ import annotations

import batching


class Stats:
    """``nodes``, ``batches``, ``kernels`` (batched op kernels + gathers + copies),
    ``copied_bytes``, ``flushes`` (forcings inside the scope), ``times`` (seconds: ``record``,
    ``schedule``, ``plan`` (the memory plan and compiling the flush; ~0 on a plan-cache hit),
    ``execute``, ``backward``), ``lower_bound`` (ED-Batch A.3, computed on demand), and
    ``cache_hits``/``cache_misses`` of the plan cache (one lookup per flush), and host/device
    ``transfers`` and ``transfer_bytes`` (inputs going in, forced values coming out; zero on numpy),
    and with a memory plan, how many batch operands it made contiguous (``aligned_operands`` of
    ``planned_operands``)."""

    def __init__(self):
        self.nodes = 0
        self.batches = 0
        self.kernels = 0
        self.copied_bytes = 0
        self.flushes = 0
        self.cache_hits = 0
        self.cache_misses = 0
        self.transfers = 0
        self.transfer_bytes = 0
        self.aligned_operands = 0
        self.planned_operands = 0
        self.times = {"record": 0.0, "schedule": 0.0, "plan": 0.0, "execute": 0.0, "backward": 0.0}
        self.per_signature: dict[str, list[int]] = {}
        self._segments = []
        self._lower_bound = None

    def add_segment(self, view, batches, table):
        self.nodes += len(view)
        self.batches += len(batches)
        self._segments.append(view)
        self._lower_bound = None
        labels = table.label
        for b in batches:
            self.per_signature.setdefault(labels[int(view.sig[b[0]])], []).append(len(b))

    @property
    def lower_bound(self) -> int:
        if self._lower_bound is None:
            self._lower_bound = sum(batching.lower_bound(v) for v in self._segments)
        return self._lower_bound

    def as_dict(self) -> dict:
        return {"nodes": self.nodes, "batches": self.batches, "lower_bound": self.lower_bound,
                "kernels": self.kernels, "copied_bytes": self.copied_bytes, "flushes": self.flushes,
                "cache_hits": self.cache_hits, "cache_misses": self.cache_misses,
                "transfers": self.transfers, "transfer_bytes": self.transfer_bytes,
                "aligned_operands": self.aligned_operands, "planned_operands": self.planned_operands,
                "times": dict(self.times)}

    def __str__(self):
        t = self.times
        rows = [("nodes", self.nodes), ("batches", self.batches), ("lower bound", self.lower_bound),
                ("kernels", self.kernels), ("copied bytes", self.copied_bytes), ("flushes", self.flushes),
                ("plan cache hits", f"{self.cache_hits}/{self.cache_hits + self.cache_misses}"),
                ("transfers", f"{self.transfers} ({self.transfer_bytes} bytes)")]
        rows += [(f"{k} ms", f"{v * 1e3:.2f}") for k, v in t.items()]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    __repr__ = __str__

    def explain(self) -> str:
        """One line per signature: how many batches, and their sizes."""
        lines = [f"{'batches':>7} {'nodes':>7} {'sizes':<24} signature"]
        for label, sizes in sorted(self.per_signature.items(), key=lambda kv: -sum(kv[1])):
            shown = ",".join(map(str, sizes[:6])) + (",..." if len(sizes) > 6 else "")
            lines.append(f"{len(sizes):>7} {sum(sizes):>7} {shown:<24} {label}")
        return "\n".join(lines)
