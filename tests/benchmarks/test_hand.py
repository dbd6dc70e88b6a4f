"""Every hand-batched baseline computes what the per-instance code computes eagerly."""
import numpy as np
import pytest

from benchmarks.hand import HAND
from lazyarray.workloads import WORKLOADS

FORMS = [(name, form) for name, forms in HAND.items() for form in forms]


def test_every_workload_has_a_hand_batched_form():
    assert set(HAND) == set(WORKLOADS) and all(HAND.values())


@pytest.mark.parametrize("name, form", FORMS)
def test_hand_batched_equals_eager(case, assert_same, name, form):
    w, params, lazy, instances = case(name, n=6, seed=2)
    value = HAND[name][form](params, instances)
    assert value.dtype == np.float32
    assert_same(value, w.scope_loss(lazy, instances))


@pytest.mark.parametrize("name, form", FORMS)
def test_hand_batched_single_instance(case, assert_same, name, form):
    w, params, lazy, instances = case(name, n=1, seed=3)
    assert_same(HAND[name][form](params, instances), w.scope_loss(lazy, instances))
