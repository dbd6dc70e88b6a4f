"""Blocked runs of elementwise steps: batches bigger than a block compute, block by block,
exactly what the whole-array path computes, and what eager code computes."""
import importlib

import numpy as np
import pytest

import lazyarray as la

blocks = importlib.import_module("lazyarray.blocks")
rng = np.random.default_rng(5)
H = 4


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


U = la.parameter(f32(5 * H, 2 * H), name="U")
b = la.parameter(f32(5 * H), name="b")


def lstm_node(hl, cl, hr, cr):
    """Adjacent split parts (one sigmoid), products of different operands, values used only
    inside the run, values read after it, and two cell outputs."""
    i, fl, fr, o, u = la.split(U @ la.concatenate([hl, hr]) + b, 5)
    c = la.sigmoid(i) * la.tanh(u) + la.sigmoid(fl) * cl + la.sigmoid(fr) * cr
    h = la.sigmoid(o) * la.tanh(c)
    return h, c, la.sum(h * 0.5) + 1.0


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(blocks, "BLOCK_BYTES", 3 * H * 4)  # 8 rows per block


@pytest.mark.parametrize("calls", [1, 8, 9, 30])
def test_blocked_cells_equal_eager(small_blocks, calls):
    node = la.cell(lstm_node)  # traced while blocks are small
    states = [(f32(H), f32(H), f32(H), f32(H)) for _ in range(calls)]
    with la.batching() as scope:
        got = [node(*[la.tanh(x) for x in s]) for s in states]
    want = [lstm_node(*[la.tanh(la.array(x)) for x in s]) for s in states]
    plan = [p.plan for p in scope.table.payload if p.kind == "cell" and p.plan.name == "lstm_node"][-1]
    assert plan.blocked and all(rows == 8 for *_, rows in plan.blocked)
    for g, w in zip(got, want):
        for a, e in zip(g, w):
            np.testing.assert_allclose(a.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-6)


def test_a_cell_returning_one_value_in_a_tuple_always_returns_a_tuple():
    @la.cell
    def one(x):
        return (la.tanh(x),)

    with la.batching():
        outs = [one(la.tanh(f32(H))) for _ in range(3)]  # the first call traces, the others take the fast path
    assert all(isinstance(o, tuple) and len(o) == 1 for o in outs)
