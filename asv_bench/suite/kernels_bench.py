"""Batched kernels whose speed depends on memory layout: a classifier loss over few classes
(``pick_log_softmax`` reduces columns of a transposed copy) and products ``X @ W.T`` over a
row-major weight against its column-major copy (``lazyarray.arrange.weight``)."""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from lazyarray import arrange  # noqa: E402
from ops_registry.opdef import REGISTRY  # noqa: E402


class PickLogSoftmax:
    params = ([5, 64, 1000], [64, 1250])
    param_names = ["classes", "rows"]

    def setup(self, classes, rows):
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((rows, classes)).astype(np.float32)
        self.labels = rng.integers(0, classes, rows)
        self.op = REGISTRY["pick_log_softmax"]

    def time_batched(self, classes, rows):
        self.op.batched(np, (True,), self.x, self.labels)


class Products:
    params = (["row-major", "column-major"], [4, 64, 1024])
    param_names = ["weight", "rows"]

    def setup(self, weight, rows):
        rng = np.random.default_rng(0)
        W = rng.standard_normal((512, 256)).astype(np.float32)
        self.W = W if weight == "row-major" else arrange._column_major(W)
        self.X = rng.standard_normal((rows, 256)).astype(np.float32)
        self.out = np.empty((rows, 512), np.float32)

    def time_product(self, weight, rows):
        np.matmul(self.X, self.W.T, out=self.out)


class ColumnMajorCopy:
    """What a flush pays once per weight that its small batches read."""

    params = ["512x256", "1280x512"]
    param_names = ["shape"]

    def setup(self, shape):
        rows, cols = map(int, shape.split("x"))
        self.W = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)

    def time_tiled(self, shape):
        arrange._column_major(self.W)

    def time_numpy(self, shape):
        np.asfortranarray(self.W)
