"""Every hand-batched baseline computes what the per-instance code computes eagerly."""
import numpy as np
import pytest

from benchmarks.hand import HAND
from benchmarks.hand_parser import parse
from lazyarray.workloads import WORKLOADS
from lazyarray.workloads.parser import parse as parse_eagerly

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


def test_lock_step_parser_takes_the_eager_transitions(case):
    _, params, lazy, sentences = case("parser", n=6, seed=2)
    assert parse(params, sentences)[0] == [parse_eagerly(lazy, s)[0] for s in sentences]
