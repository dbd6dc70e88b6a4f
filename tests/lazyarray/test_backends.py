"""Backends: numpy by default, cupy only when asked; the same workloads on every backend."""
import subprocess
import sys

import numpy as np
import pytest

import lazyarray as la
from lazyarray.workloads import WORKLOADS

BACKENDS = ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]


def _cupy_or_skip():
    cupy = pytest.importorskip("cupy", reason="cupy is not installed (GPU tests run on GPU machines)")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # pragma: no cover - depends on the machine
        pytest.skip(f"no usable GPU: {error}")
    return cupy


def test_cupy_is_never_imported_unless_asked():
    code = ("import lazyarray as la, numpy as np, sys\n"
            "with la.batching():\n    y = la.tanh(np.ones(3, np.float32))\n"
            "float(la.sum(y)); print('cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_default_backend_is_thread_local_and_validated():
    assert la.get_backend().name == "numpy"
    with pytest.raises(ValueError, match="unknown backend"):
        la.set_default_backend("opencl")
    la.set_default_backend("numpy")
    assert la.batching().backend.name == "numpy"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["treelstm", "bilstm", "latticelstm", "treefc"])
def test_workloads_on_every_backend_equal_eager_numpy(backend, name):
    w = WORKLOADS[name]
    params = w.init(H=8, seed=0)
    instances = w.data(3, seed=1)
    eager = w.scope_loss(params.lazy(), instances).asnumpy()
    lazy = params.lazy()
    if backend == "cupy":
        _cupy_or_skip()
        lazy = type(lazy)(**{k: v.to("cupy") for k, v in lazy.items()})
    with la.batching(backend=backend) as scope:
        total = w.scope_loss(lazy, instances)
    np.testing.assert_allclose(total.asnumpy(), eager, rtol=1e-4, atol=1e-5)
    if backend == "numpy":
        assert scope.stats.transfers == 0


@pytest.mark.gpu
def test_numpy_parameters_in_a_cupy_scope_are_explained():
    cupy = _cupy_or_skip()
    W = la.parameter(np.ones((2, 2), np.float32), name="W")
    with pytest.raises(TypeError, match="numpy array but this scope runs on the cupy backend"):
        with la.batching(backend="cupy"):
            W @ cupy.ones(2, dtype=cupy.float32)
    Wd = W.to("cupy")
    with la.batching(backend="cupy") as scope:
        y = Wd @ np.ones(2, np.float32)
    np.testing.assert_allclose(y.asnumpy(), [2, 2])
    assert scope.stats.transfers == 2  # the input in, the forced value out


def test_cupy_parameters_in_a_numpy_scope_are_explained():
    class FakeDevice:
        """Stands for a device array: numpy-backend scopes must refuse it as a parameter."""

        shape, dtype, ndim = (2,), np.dtype(np.float32), 1
        __cuda_array_interface__ = {}

    W = la.parameter(FakeDevice(), name="Wd")
    with pytest.raises(TypeError, match="this scope runs on the numpy backend"):
        with la.batching():
            la.tanh(np.ones(2, np.float32)) + W
