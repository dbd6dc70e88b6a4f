"""``la.dropout`` keyed by ``la.manual_seed``'s stream (lazyarray.keys): a seed gives the same
masks, values and gradients eagerly and batched, at op level, in cells, and in cells that call
cells that draw keys."""
import numpy as np
import pytest

import lazyarray as la

rng = np.random.default_rng(3)
W = la.parameter(rng.standard_normal((4, 4)).astype(np.float32))


def op_level(x):
    return la.tanh(la.dropout(W @ x, 0.5)) + la.dropout(x, 0.25)


@la.cell
def inner(x):
    return la.dropout(W @ x, 0.5)


@la.cell
def cell(x):
    return la.tanh(la.dropout(W @ x, 0.5)) + la.dropout(x, 0.25)


@la.cell
def nested(x):
    """A cell calling a cell that draws a key, then drawing one itself: each call of ``nested``
    draws both (the inner one's placeholder was refused as a Python int)."""
    return la.tanh(inner(x)) + la.dropout(x, 0.25)


def run(model, xs, scheduler):
    la.manual_seed(7)
    if scheduler is None:
        outs = [model(x) for x in xs]
        la.sum(la.stack(outs)).backward()
    else:
        with la.batching(scheduler=scheduler):
            outs = [model(x) for x in xs]
            la.sum(la.stack(outs)).backward()
    grad, W.grad = W.grad, None
    return [o.asnumpy() for o in outs], grad


@pytest.mark.parametrize("scheduler", ["depth", "agenda", "sufficient"])
@pytest.mark.parametrize("model", [op_level, cell, nested], ids=lambda f: f.__name__)
def test_a_seed_gives_the_eager_masks_values_and_gradients(model, scheduler):
    xs = [la.array(rng.standard_normal(4).astype(np.float32)) for _ in range(5)]
    want, want_grad = run(model, xs, None)
    got, grad = run(model, xs, scheduler)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5)
    dropped = [np.count_nonzero(w == 0) for w in want]
    assert 0 < sum(dropped) < 20    # masks drop some values, and not all of them
    again, _ = run(model, xs, scheduler)
    for g, w in zip(again, got):
        np.testing.assert_array_equal(g, w)
