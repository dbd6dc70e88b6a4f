"""Record-time fusion (lazyarray.fusion): ``W @ x + b`` -> affine, ``log_softmax(z)[label]`` ->
pick_log_softmax; an intermediate the program still uses is revived, never wrong."""
import numpy as np
import pytest
import scipy.special

import lazyarray as la

rng = np.random.default_rng(5)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


W = la.parameter(f32(4, 3), name="W")
b = la.parameter(f32(4), name="b")
Wv, bv = W.asnumpy(), b.asnumpy()


def signatures(scope):
    return [line.split(None, 3)[3] for line in scope.explain().splitlines()[1:]]


@pytest.mark.parametrize("form", [lambda x: W @ x + b, lambda x: b + W @ x, lambda x: la.add(la.matmul(W, x), b),
                                  lambda x: W @ x + 0.5])
def test_affine_pattern_records_one_node_per_instance(form):
    xs = [f32(3) for _ in range(5)]
    with la.batching() as scope:
        outs = [form(la.array(x)) for x in xs]
    for out, x in zip(outs, xs):
        np.testing.assert_allclose(out.asnumpy(), form(la.array(x)).asnumpy(), rtol=1e-5, atol=1e-6)
    assert scope.stats.nodes == 2 * 5  # inputs and affine nodes only
    assert [s for s in signatures(scope) if not s.startswith("input")] == [
        s for s in signatures(scope) if s.startswith("affine")]


def test_loss_pattern_records_one_node():
    zs, labels = [f32(5) for _ in range(4)], [0, 3, 4, 1]
    with la.batching() as scope:
        picked = [la.log_softmax(la.array(z))[k] for z, k in zip(zs, labels)]
        picked += [la.pick(la.log_softmax(la.array(z)), k) for z, k in zip(zs, labels)]
    want = [scipy.special.log_softmax(z)[k] for z, k in zip(zs, labels)] * 2
    np.testing.assert_allclose([float(p) for p in picked], want, rtol=1e-5)
    assert any(s.startswith("pick_log_softmax") for s in signatures(scope))
    assert not any(s.startswith("log_softmax") for s in signatures(scope))


def test_a_row_of_a_matrix_log_softmax_is_not_a_pick():
    Z = f32(3, 5)
    with la.batching() as scope:
        row = la.log_softmax(la.array(Z))[1]
    np.testing.assert_allclose(row.asnumpy(), scipy.special.log_softmax(Z, axis=-1)[1], rtol=1e-5)
    assert not any(s.startswith("pick_log_softmax") for s in signatures(scope))


def test_no_fusion_where_the_product_is_already_consumed_or_the_bias_broadcasts():
    x = f32(3)
    with la.batching() as scope:
        y = W @ la.array(x)
        doubled = y * 2
        shifted = y + b                        # y is not the last node any more
        wide = W @ la.array(x) + la.parameter(f32(2, 4))  # the bias would change the shape
    np.testing.assert_allclose(shifted.asnumpy(), Wv @ x + bv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(doubled.asnumpy(), 2 * (Wv @ x), rtol=1e-5, atol=1e-6)
    assert wide.shape == (2, 4)
    assert not any(s.startswith("affine") for s in signatures(scope))


def test_an_intermediate_used_after_fusion_is_revived():
    x = f32(3)
    with la.batching() as scope:
        y = W @ la.array(x)
        z = y + b                              # fused: y's handle is detached
        again = la.tanh(y)                     # ... and revived by this use
        inside = float(la.sum(y))              # forcing a revived value inside the scope
    np.testing.assert_allclose(again.asnumpy(), np.tanh(Wv @ x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z.asnumpy(), Wv @ x + bv, rtol=1e-5, atol=1e-6)
    assert inside == pytest.approx(float((Wv @ x).sum()), rel=1e-5)
    assert scope.stats.flushes == 1


def test_an_intermediate_forced_inside_or_after_the_scope():
    x = f32(3)
    with la.batching():
        y = W @ la.array(x)
        z = y + b
        forced = y.asnumpy()                   # revived, then flushed
        y2 = W @ la.array(x)
        z2 = y2 + b
    np.testing.assert_allclose(forced, Wv @ x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y2.asnumpy(), Wv @ x, rtol=1e-5, atol=1e-6)  # computed now, from the executed x
    np.testing.assert_allclose(z.asnumpy() - z2.asnumpy(), 0, atol=1e-6)


def test_an_intermediate_of_a_failed_scope_raises():
    with pytest.raises(RuntimeError):
        with la.batching():
            y = W @ la.array(f32(3))
            y + b
            raise RuntimeError("user error")
    with pytest.raises(la.ScopeError, match="failed"):
        y.asnumpy()


def test_cells_fuse_inside_their_bodies():
    @la.cell
    def step(x):
        y = W @ x
        return la.tanh(y + b), y                # y is both fused and returned

    xs = [f32(3) for _ in range(4)]
    with la.batching():
        outs = [step(la.array(x)) for x in xs]
    for (h, y), x in zip(outs, xs):
        np.testing.assert_allclose(h.asnumpy(), np.tanh(Wv @ x + bv), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y.asnumpy(), Wv @ x, rtol=1e-5, atol=1e-6)
