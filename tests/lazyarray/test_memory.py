"""Memory plans: results equal eager (and are identical with the plan on and off) for every
workload, style and scheduler; the plan turns gathers into views."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.workloads import WORKLOADS

CASES = [(name, cells) for name, w in WORKLOADS.items() for cells in (False, True)
         if not cells or w.cells is not None]


@pytest.mark.parametrize("scheduler", ["depth", "agenda"])
@pytest.mark.parametrize("name,cells", CASES, ids=[f"{n}{'-cells' if c else ''}" for n, c in CASES])
def test_results_identical_with_and_without_the_plan(name, cells, scheduler):
    w = WORKLOADS[name]
    lazy = w.init(H=8, seed=0).lazy()
    instances = w.data(3, seed=2)
    eager = w.scope_loss(lazy, instances).asnumpy()
    results = []
    for memplan in (False, True):
        with la.batching(scheduler=scheduler, memplan=memplan) as scope:
            results.append(w.scope_loss(lazy, instances, cells=cells).asnumpy())
        np.testing.assert_allclose(results[-1], eager, rtol=1e-4, atol=1e-4 * max(1, np.abs(eager).max()))
    assert scope.stats.planned_operands > 0  # the plan ran and was asked about operands
    np.testing.assert_array_equal(results[0], results[1])


ORDER = (1, 3, 5, 0, 2, 4)


def test_plan_turns_gathers_into_views():
    W = la.parameter(np.eye(4, dtype=np.float32))

    def model(k, j):
        return W @ (la.tanh(np.full(4, k, np.float32)) * la.sigmoid(np.full(4, -j, np.float32)))

    def run(memplan):
        with la.batching(memplan=memplan) as scope:
            xs = [la.tanh(np.full(4, k, np.float32)) for k in range(6)]
            us = [la.sigmoid(np.full(4, -j, np.float32)) for j in range(6)]
            # each product reads the two producer batches in different orders: whichever runs
            # last sets the products' order, so without a plan the other operand is gathered
            ys = [W @ (xs[k] * us[j]) for j, k in enumerate(ORDER)]
        return scope.stats, [y.asnumpy() for y in ys]

    plain, got_plain = run(False)
    planned, got_planned = run(True)
    eager = [model(k, j).asnumpy() for j, k in enumerate(ORDER)]
    for a, b, e in zip(got_plain, got_planned, eager):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(b, e, rtol=1e-6)
    assert planned.copied_bytes < plain.copied_bytes
    assert planned.aligned_operands == planned.planned_operands
