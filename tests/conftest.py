"""Fixtures of the workload tests (tests/lazyarray/workloads, tests/benchmarks): tiny sizes keep
them to seconds, H = 8 and a few instances per scope. tests/benchmarks has no __init__.py: with
one, --import-mode=importlib would name its modules ``benchmarks.*`` and hide the repository's
``benchmarks`` package."""
import numpy as np
import pytest

H = 8
RTOL = 1e-4


def _assert_same(value, reference):
    reference = np.asarray(reference, np.float64)
    atol = RTOL * max(1.0, float(np.abs(reference).max(initial=0.0)))
    np.testing.assert_allclose(np.asarray(value, np.float64), reference, rtol=RTOL, atol=atol)


@pytest.fixture(scope="session")
def assert_same():
    """allclose at float32 tolerance, atol scaled to the reference's magnitude."""
    return _assert_same


@pytest.fixture(scope="session")
def case():
    """(workload, numpy params, lazy params, instances), cached per (name, n, seed)."""
    from lazyarray.workloads import WORKLOADS

    cache = {}

    def get(name, n=3, seed=1):
        if (name, n, seed) not in cache:
            w = WORKLOADS[name]
            params = w.init(H, seed=seed)
            cache[name, n, seed] = w, params, params.lazy(), w.data(n, seed=seed)
        return cache[name, n, seed]

    return get
