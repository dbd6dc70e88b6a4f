"""Memory plans: identical results with the plan on and off, for every workload, style and
scheduler; the plan turns gathers into views."""
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
    results = []
    for memplan in (False, True):
        with la.batching(scheduler=scheduler, memplan=memplan) as scope:
            results.append(w.scope_loss(lazy, instances, cells=cells).asnumpy())
        if memplan:
            assert scope.stats.aligned_operands <= scope.stats.planned_operands
    np.testing.assert_array_equal(results[0], results[1])


def test_plan_turns_gathers_into_views():
    W = la.parameter(np.eye(4, dtype=np.float32))

    def run(memplan):
        with la.batching(memplan=memplan) as scope:
            xs = [la.tanh(np.full(4, k, np.float32)) for k in range(6)]
            ys = [W @ xs[k] for k in (1, 3, 5, 0, 2, 4)]  # consumers read producers out of order
        return scope.stats, [y.asnumpy() for y in ys]

    plain, got_plain = run(False)
    planned, got_planned = run(True)
    for a, b in zip(got_plain, got_planned):
        np.testing.assert_array_equal(a, b)
    assert planned.copied_bytes < plain.copied_bytes
    assert planned.aligned_operands == planned.planned_operands
