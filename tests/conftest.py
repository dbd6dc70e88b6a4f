"""Fixtures of the workload tests (tests/lazyarray/workloads, tests/benchmarks): tiny sizes keep
them to seconds, H = 8 and a few instances per scope. tests/benchmarks has no __init__.py: with
one, --import-mode=importlib would name its modules ``benchmarks.*`` and hide the repository's
``benchmarks`` package."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

H = 8
RTOL = 1e-4

# The random-program and random-cell-body campaign (issue 21): LAZYARRAY_CAMPAIGN=N selects this
# profile, N examples for each of those generators (their default counts stay as they are; see
# ``examples`` in tests/lazyarray/test_random_programs.py and test_cell.py), the costly forms
# drawn more often (``COSTLY`` there). One generator per process, one process at a time, each
# run with a recorded seed, the passing examples summed from the statistics, e.g.
#
#   LAZYARRAY_CAMPAIGN=10500 timeout 1800 nice -n 10 python -m pytest -q -p no:cacheprovider \
#       --hypothesis-show-statistics --hypothesis-seed=2101 \
#       tests/lazyarray/test_random_programs.py::test_random_programs_gradients_batched_equal_eager
#
# for each of test_random_programs.py's three random-program tests and test_cell.py's two
# test_random_cell_bodies_* tests (the issue 21 campaign: two such runs of each, seeds 2101-2110).
settings.register_profile(
    "campaign", max_examples=int(os.environ.get("LAZYARRAY_CAMPAIGN") or 1), derandomize=False, deadline=None,
    database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
if os.environ.get("LAZYARRAY_CAMPAIGN"):
    settings.load_profile("campaign")


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
