"""The core's overheads: recording cost per op (the product's overhead) and scheduling cost per
node, on an op-level TreeLSTM over SST test trees."""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import lazyarray as la  # noqa: E402
from lazyarray.workloads import WORKLOADS  # noqa: E402


class Recording:
    """Recording only (``la.record`` drops the graph instead of running it)."""

    params = [64]
    param_names = ["trees"]

    def setup(self, trees):
        w = WORKLOADS["treelstm"]
        self.w, self.lazy, self.trees = w, w.init(H=32).lazy(), w.data(trees, seed=0)

    def time_record_treelstm(self, trees):
        la.record(self.w.scope_loss, self.lazy, self.trees)

    def time_record_treelstm_cells(self, trees):
        la.record(lambda: self.w.scope_loss(self.lazy, self.trees, cells=True))

    def track_recorded_ops(self, trees):
        return len(la.record(self.w.scope_loss, self.lazy, self.trees))

    def track_recorded_cells(self, trees):
        return len(la.record(lambda: self.w.scope_loss(self.lazy, self.trees, cells=True)))


class Scheduling:
    params = (["depth", "agenda"], [64])
    param_names = ["scheduler", "trees"]

    def setup(self, scheduler, trees):
        w = WORKLOADS["treelstm"]
        self.view = la.record(w.scope_loss, w.init(H=32).lazy(), w.data(trees, seed=0))
        self.scheduler = la.batching(scheduler=scheduler).scheduler

    def time_schedule(self, scheduler, trees):
        self.scheduler.schedule(self.view)

    def track_nodes(self, scheduler, trees):
        return len(self.view)
