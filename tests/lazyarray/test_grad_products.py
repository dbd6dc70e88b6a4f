"""A shared weight's gradient from batches of ``W @ x_i`` is one GEMM over all their rows at the
end of the backward (``Staging.product``): the rows it waits for must still hold the values of
their batch then, across reductions and however the batch read them."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.grad import leaf

H = 3
RNG = np.random.default_rng(0)
W = RNG.standard_normal((4 * H, 2 * H)).astype(np.float32)
B = RNG.standard_normal(4 * H).astype(np.float32)
SENTENCES = [RNG.standard_normal((n, H)).astype(np.float32) for n in (5, 3, 4, 1, 2)]


def step(Wp, bp, x, h):
    gates = la.tanh(Wp @ la.concatenate([x, h]) + bp)
    return la.sum(gates[:H] * gates[H:2 * H], axis=0) + h[:H] * 0.5


cell_step = la.cell(step)


def product(Wp, x):
    """``W @ x`` of an argument: in a cell, the cell's argument is the product's operand itself."""
    return la.tanh(Wp @ x)


cell_product = la.cell(product)


def recurrence(Wp, bp, fn):
    total = []
    for sentence in SENTENCES:
        h = la.array(np.zeros(H, np.float32))
        for x in sentence:
            h = fn(Wp, bp, la.array(x), h)
            total.append(la.sum(h * h))
    return la.sum(la.stack(total))


def reversed_reads(Wp, bp, fn):
    """Two batches of ``fn`` (``product``), each reading some values twice (gathered into memory that
    the later batch's gather of the same class may reuse)."""
    xs = [la.concatenate([la.tanh(la.array(x)), la.array(x)]) for s in SENTENCES for x in s]
    ys = [fn(Wp, x) for x in xs[::-1] + xs[::2]]
    zs = [la.concatenate([y[:H], y[H:2 * H] * 2.0]) for y in ys]
    return la.sum(la.stack([la.sum(fn(Wp, z)) for z in zs[::-1] + zs[::3]]))


def gradients(loss, fn, scoped):
    Wp, bp = la.parameter(W.copy()), la.parameter(B.copy())
    if scoped:
        with la.batching():
            loss(Wp, bp, fn).backward()
    else:
        loss(Wp, bp, fn).backward()
    return [np.array(p.grad) for p in (Wp, bp) if p.grad is not None]


@pytest.mark.parametrize("rows", [1, 3, 2048])
@pytest.mark.parametrize("loss, fn", [(recurrence, step), (recurrence, cell_step), (reversed_reads, product), (reversed_reads, cell_product)])
def test_deferred_weight_gradients_equal_eager_ones(monkeypatch, rows, loss, fn):
    """``rows``: a reduction per batch, every few batches, once at the end."""
    monkeypatch.setattr(leaf, "PRODUCT_ROWS", rows)
    want = gradients(loss, fn, scoped=False)
    got = gradients(loss, fn, scoped=True)
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
