"""Every plain numpy model computes what the workload's la code computes eagerly."""
import io

import numpy as np
import pytest

from benchmarks import bench
from benchmarks.plain import PLAIN
from lazyarray.workloads import WORKLOADS


def test_every_workload_has_a_plain_form():
    assert set(PLAIN) == set(WORKLOADS)


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_plain_equals_eager(case, assert_same, name):
    w, params, lazy, instances = case(name, n=4, seed=2)
    value = PLAIN[name](params, instances)
    assert np.asarray(value).dtype == np.float32
    assert_same(value, w.scope_loss(lazy, instances))


@pytest.mark.parametrize("name", ["treelstm", "bilstm", "parser", "latticelstm"])
def test_plain_single_instance(case, assert_same, name):
    w, params, lazy, instances = case(name, n=1, seed=3)
    assert_same(PLAIN[name](params, instances), w.scope_loss(lazy, instances))


def test_bench_shows_plain_numpy_and_the_eager_ratio():
    out = io.StringIO()
    assert bench.main(["-w", "treefc", "--schedulers", "depth", "-H", "8", "-B", "2", "--scopes", "1",
                       "--repeats", "1"], out=out) == 0
    text = out.getvalue()
    assert bench.PLAIN_ROW in text and "MISMATCH" not in text, text
    assert float(text.split("eager / plain numpy: ")[1].split("x\n")[0]) > 0
