"""Every reference workload trains batched to the parameters it reaches eagerly: three Adam
steps from the same start, op-level and cell-style code, under each scheduler, the transition
parser's sentences as tasks of ``scope.map``."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.workloads import WORKLOADS
from lazyarray.workloads.params import Params

STEPS = 3


def train(w, params, instances, scheduler=None, cells=False):
    """The parameters (numpy) after STEPS Adam steps on the summed loss; eagerly when
    ``scheduler`` is None."""
    p = Params(**{k: v.copy() for k, v in params.items()}).lazy()
    opt = la.optim.Adam([v for _, v in p.items()], lr=0.01)
    for _ in range(STEPS):
        if scheduler is None:
            la.sum(w.scope_loss(p, instances, cells=cells)).backward()
        else:
            with la.batching(scheduler=scheduler) as scope:
                loss = la.sum(w.scope_loss(p, instances, cells=cells, scope=scope if w.forces else None))
                loss.backward()
        opt.step()
    return {k: np.array(v) for k, v in p.items()}


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workloads_train_batched_to_the_eager_parameters(case, assert_same, name):
    w, params, _, instances = case(name)
    eager = train(w, params, instances)
    moved = [k for k, v in eager.items() if not np.array_equal(v, getattr(params, k))]
    assert moved, "the eager steps changed no parameter"
    runs = [(s, False) for s in ("depth", "agenda", "sufficient", "fsm")]
    if w.cells is not None:
        runs += [("depth", True), ("agenda", True)]
    for scheduler, cells in runs:
        got = train(w, params, instances, scheduler, cells)
        for k, v in eager.items():
            assert_same(got[k], v)
