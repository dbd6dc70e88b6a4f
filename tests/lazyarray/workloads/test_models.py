"""Every model batched under each scheduler equals the same code run eagerly."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.workloads import WORKLOADS


@pytest.mark.parametrize("scheduler", ["depth", "agenda", "sufficient", "fsm"])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_batched_equals_eager(case, assert_same, name, scheduler):
    w, _, lazy, instances = case(name)
    eager = np.asarray(w.scope_loss(lazy, instances))
    with la.batching(scheduler=scheduler) as scope:
        result = w.scope_loss(lazy, instances)
    assert_same(np.asarray(result), eager)
    assert scope.stats.lower_bound <= scope.stats.batches <= scope.stats.nodes


CELL_STYLE = [name for name, w in WORKLOADS.items() if w.cells is not None]


def test_cell_style_covers_the_issue_models():
    assert set(CELL_STYLE) == {"treelstm", "treegru", "treelstm2type", "mvrnn", "treefc", "bilstm", "chartagger",
                               "parser", "latticelstm", "latticegru"}


@pytest.mark.parametrize("scheduler", ["depth", "agenda"])
@pytest.mark.parametrize("name", CELL_STYLE)
def test_cell_style_batched_equals_op_level_eager(case, assert_same, name, scheduler):
    w, _, lazy, instances = case(name)
    eager = np.asarray(w.scope_loss(lazy, instances))
    assert_same(np.asarray(w.scope_loss(lazy, instances, cells=True)), eager)  # cells run eagerly too
    with la.batching(scheduler=scheduler) as ops:
        op_level = w.scope_loss(lazy, instances)
    with la.batching(scheduler=scheduler) as cells:
        result = w.scope_loss(lazy, instances, cells=True)
    assert_same(np.asarray(result), eager)
    assert_same(np.asarray(op_level), eager)
    # a cell replaces a node's ~3-20 ops; Tree-FC's leaves stay one lookup each
    assert cells.stats.nodes < ops.stats.nodes / (1.9 if name == "treefc" else 3)
