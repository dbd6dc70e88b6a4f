"""The reference workloads under asv: one batching scope per measurement, and the per-instance
eager and hand-batched baselines of the same scope, so that history shows all three. Side-by-side
ratios within one run come from `python -m benchmarks`."""
import sys
from pathlib import Path

import lazyarray as la

# the hand-batched baselines are in the repository root's `benchmarks` package, which is never
# installed: the root goes last on the path, so the installed lazyarray still comes first (this
# suite's directory is "suite", not asv's default "benchmarks", so that the two names differ)
sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks.hand import HAND  # noqa: E402

WORKLOADS = ["treelstm", "bilstm", "latticelstm", "treefc"]
SCHEDULERS = ["depth", "agenda"]
HIDDEN = [64]
INSTANCES = [16]


class _Scope:
    timeout = 300

    def setup(self, name, *rest):
        from lazyarray.workloads import WORKLOADS as registry

        H, n = rest[-2:]
        self.workload = registry[name]
        self.params = self.workload.init(H)
        self.lazy = self.params.lazy()
        self.instances = self.workload.data(n)


class Batched(_Scope):
    params = (WORKLOADS, SCHEDULERS, HIDDEN, INSTANCES)
    param_names = ["workload", "scheduler", "H", "instances"]

    def run(self, scheduler):
        with la.batching(scheduler=scheduler) as scope:
            result = self.workload.scope_loss(self.lazy, self.instances)
        result.asnumpy()
        return scope.stats

    def time_scope(self, name, scheduler, H, n):
        self.run(scheduler)

    def peakmem_scope(self, name, scheduler, H, n):
        self.run(scheduler)

    def track_batches(self, name, scheduler, H, n):
        return self.run(scheduler).batches

    def track_lower_bound(self, name, scheduler, H, n):
        return self.run(scheduler).lower_bound

    def track_kernels(self, name, scheduler, H, n):
        return self.run(scheduler).kernels

    def track_copied_bytes(self, name, scheduler, H, n):
        return self.run(scheduler).copied_bytes

    track_batches.unit = track_lower_bound.unit = "batches"
    track_kernels.unit = "kernels"
    track_copied_bytes.unit = "bytes"


class Planned(_Scope):
    """``Batched``'s agenda scope with a memory plan (from the plan cache after the first
    run): copied bytes and kernels fall where the plan and joins read in place turn gathers
    into views."""

    params = (WORKLOADS, HIDDEN, INSTANCES)
    param_names = ["workload", "H", "instances"]

    def run(self):
        with la.batching(memplan=True) as scope:
            result = self.workload.scope_loss(self.lazy, self.instances)
        result.asnumpy()
        return scope.stats

    def time_scope(self, name, H, n):
        self.run()

    def track_kernels(self, name, H, n):
        return self.run().kernels

    def track_copied_bytes(self, name, H, n):
        return self.run().copied_bytes

    track_kernels.unit = "kernels"
    track_copied_bytes.unit = "bytes"


class Baselines(_Scope):
    params = (WORKLOADS, HIDDEN, INSTANCES)
    param_names = ["workload", "H", "instances"]

    def time_eager(self, name, H, n):
        self.workload.scope_loss(self.lazy, self.instances).asnumpy()

    def time_hand_batched(self, name, H, n):
        next(iter(HAND[name].values()))(self.params, self.instances)
