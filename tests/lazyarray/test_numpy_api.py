"""numpy's ufuncs and functions on LazyArrays record like lazyarray's own operators inside a
scope, run eagerly outside one, and never flush a scope silently."""
import numpy as np
import pytest

import lazyarray as la

rng = np.random.default_rng(13)
W = la.parameter(rng.standard_normal((4, 4)).astype(np.float32), name="W_np")


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


CALLS = {
    "np.tanh": lambda x, y: np.tanh(x), "np.exp": lambda x, y: np.exp(x), "np.maximum": lambda x, y: np.maximum(x, y),
    "np.add": lambda x, y: np.add(x, 2.0), "np.absolute": lambda x, y: np.absolute(x),
    "np.matmul": lambda x, y: np.matmul(W, x), "np.dot": lambda x, y: np.dot(W, x),
    "np.concatenate": lambda x, y: np.concatenate([x, y]), "np.stack": lambda x, y: np.stack([x, y], axis=1),
    "np.where": lambda x, y: np.where(x > y, x, y), "np.reshape": lambda x, y: np.reshape(x, (2, 2)),
    "np.transpose": lambda x, y: np.transpose(np.reshape(x, (2, 2))), "np.sum": lambda x, y: np.sum(x),
    "np.mean": lambda x, y: np.mean(x, axis=0, keepdims=True), "np.max": lambda x, y: np.max(x),
    "np.add.reduce": lambda x, y: np.add.reduce(x), "np.split": lambda x, y: np.split(x, 2)[1],
    "np.take": lambda x, y: np.take(x, [3, 1]), "ndarray + LazyArray": lambda x, y: np.ones(4, np.float32) + x,
    "np.min": lambda x, y: np.min(x), "np.amin": lambda x, y: np.amin(x, 0, None, True),
    "np.minimum.reduce": lambda x, y: np.minimum.reduce(x), "np.argmax": lambda x, y: np.argmax(x),
    "np.argmin": lambda x, y: np.argmin(np.reshape(x, (2, 2)), axis=1, keepdims=True),
    "np.any": lambda x, y: np.any(x > y), "np.all": lambda x, y: np.all(np.reshape(x > 0, (2, 2)), axis=0),
    "np.logical_or.reduce": lambda x, y: np.logical_or.reduce(x > y),
    "np.clip": lambda x, y: np.clip(x, -0.5, y), "np.clip(min=)": lambda x, y: np.clip(x, min=0.1),
    "np.clip(None, hi)": lambda x, y: np.clip(x, None, 0.2), "np.clip(None, None)": lambda x, y: np.clip(x, None, None),
    "np.arctan2": lambda x, y: np.arctan2(x, y), "np.atan2": lambda x, y: np.atan2(y, 2.0),
    "np.hypot": lambda x, y: np.hypot(x, y), "np.floor": lambda x, y: np.floor(x), "np.asinh": lambda x, y: np.asinh(x),
    "np.log1p": lambda x, y: np.log1p(np.abs(x)), "np.sin": lambda x, y: np.sin(x), "np.cos": lambda x, y: np.cos(x),
    "np.zeros_like": lambda x, y: np.zeros_like(x) + x, "np.ones_like": lambda x, y: y * np.ones_like(x, shape=(2, 1)),
    "np.full_like": lambda x, y: np.full_like(x, 3, dtype=np.float64) - y,
    "np.expand_dims": lambda x, y: np.expand_dims(x, 0), "np.squeeze": lambda x, y: np.squeeze(np.reshape(x, (1, 4))),
    "np.broadcast_to": lambda x, y: np.broadcast_to(x, (2, 4)), "np.repeat": lambda x, y: np.repeat(x, 2),
    "np.tile": lambda x, y: np.tile(x, (2, 1)), "np.ravel": lambda x, y: np.ravel(np.reshape(x, (2, 2))),
    "np.copy": lambda x, y: np.copy(x), "np.astype": lambda x, y: np.astype(x, np.float64),
    "np.split(points)": lambda x, y: np.split(x, [1, 3])[1],
    "np.einsum": lambda x, y: np.einsum("ij,j->i", W, x), "np.einsum(outer)": lambda x, y: np.einsum("i,j", x, y),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_numpy_calls_record_without_a_flush_and_equal_numpy(name):
    call = CALLS[name]
    xs = [(f32(4), f32(4)) for _ in range(3)]
    want = [call(x, y) for x, y in xs]                              # numpy on numpy arrays
    eager = [call(la.array(x), la.array(y)) for x, y in xs]         # eager: LazyArrays back
    assert all(isinstance(e, la.LazyArray) for e in eager)
    with la.batching() as scope:
        got = [call(la.array(x), la.array(y)) for x, y in xs]
        assert all(isinstance(g, la.LazyArray) for g in got)
    assert scope.stats.flushes == 0
    for g, e, w in zip(got, eager, want):
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-5)
        np.testing.assert_allclose(e.asnumpy(), w, rtol=1e-5)


def test_metadata_functions_do_not_force():
    with la.batching() as scope:
        y = la.tanh(la.array(f32(2, 3)))
        assert (np.shape(y), np.ndim(y), np.size(y)) == ((2, 3), 2, 6)
    assert scope.stats.flushes == 0


def test_what_lazyarray_cannot_record_runs_on_values_or_names_itself_instead_of_flushing():
    x = la.array(np.array([1.0, np.inf], np.float32))
    assert np.isfinite(x).tolist() == [True, False]            # a concrete value: numpy's result
    with la.batching() as scope:
        y = la.tanh(la.array(f32(3)))
        with pytest.raises(TypeError, match="np.isfinite.*silent flush"):
            np.isfinite(y)
        with pytest.raises(TypeError, match="np.cumsum"):
            np.cumsum(y)
        with pytest.raises(TypeError, match="out not supported"):
            np.sum(y, out=np.zeros(()))
        with pytest.raises(TypeError, match="depends on the values"):
            np.where(y > 0)
        assert scope.stats.flushes == 0
        np.asarray(y)                                           # explicit forcing still works
        assert scope.stats.flushes == 1
        assert np.isfinite(y).all()                             # computed now: no flush needed
    assert scope.stats.flushes == 1


def test_constants_in_a_scope_are_shared_read_only_and_usable_in_cell_bodies():
    """la.zeros/ones/full in a scope: one constant per (shape, dtype, fill), a shared operand
    without a gradient that nothing can write into; a cell body may use it (a numpy array it
    did not get as an argument is refused: tests/lazyarray/test_cell.py)."""
    xs = [f32(3) for _ in range(4)]

    @la.cell
    def step(h):
        return la.tanh(h + la.zeros(3, np.float32) + la.full_like(h, 0.5)) * la.ones(3, np.float32)

    want = [np.tanh(x + 0.5) for x in xs]
    eager = [step(la.array(x)) for x in xs]
    with la.batching() as scope:
        got = [step(la.array(x, grad=True)) for x in xs]
        made = [la.zeros(3, np.float32) for _ in range(2)]
        la.sum(la.stack(got)).backward()
    assert made[0] is made[1] and made[0].is_parameter and not made[0].requires_grad
    with pytest.raises(ValueError, match="read-only"):
        made[0].asnumpy()[0] = 1
    assert scope.stats.flushes == 0 and scope.stats.batches == 4
    for g, e, w in zip(got, eager, want):
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-6)
        np.testing.assert_allclose(e.asnumpy(), w, rtol=1e-6)
    fresh = la.zeros(2)
    fresh.asnumpy()[0] = 1          # outside a scope: a fresh array of its own, as numpy's
    assert la.zeros(2).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("call, error", [
    (lambda: la.zeros(-1), la.ShapeError), (lambda: la.ones("3"), la.ShapeError),
    (lambda: la.full(3, la.array(1.0)), TypeError), (lambda: la.full(3, 1, object), TypeError)])
def test_bad_constants_are_refused_at_the_call(call, error):
    with pytest.raises(error):
        call()
    with la.batching(), pytest.raises(error):
        call()


def test_boolean_masks_choose_in_where_and_carry_gradients_to_the_chosen_side():
    """A padding mask as a bool future, a bool input or a numpy bool array: la.where and
    np.where record it, and the gradient reaches only the entries it keeps."""
    xs, masks = [f32(4) for _ in range(3)], [np.arange(4) < n for n in (1, 3, 4)]
    p = la.parameter(f32(4), name="masked")
    with la.batching() as scope:
        kept = [la.where(la.array(m), p * x, 0.0) for x, m in zip(xs, masks)]
        kept += [np.where(la.array(x) > 0, p, -p) for x in xs]
        kept += [la.where(m, p, la.zeros(4, np.float32)) for m in masks]
        la.sum(la.stack(kept)).backward()
    assert scope.stats.flushes == 0
    want = (sum(np.where(m, x, 0) for x, m in zip(xs, masks)) + sum(np.where(x > 0, 1, -1) for x in xs)
            + sum(m.astype(np.float32) for m in masks))
    np.testing.assert_allclose(p.grad, want, rtol=1e-6)
    np.testing.assert_allclose(kept[0].asnumpy(), np.where(masks[0], p.asnumpy() * xs[0], 0), rtol=1e-6)


def test_child_sum_batches_nodes_of_any_number_of_children_under_one_signature():
    """A child-sum TreeLSTM's sum over 1 to 5 children: equal to numpy's sum, gradients equal
    to eager ones, and every node's adds in one signature: ceil(log2 5) = 3 batches of adds
    for 5 nodes, where stacking would have made one signature per child count."""
    counts = [1, 2, 3, 4, 5]
    values = [[f32(3) for _ in range(k)] for k in counts]
    U = la.parameter(f32(3, 3), name="U_child")

    def run():
        return [la.child_sum([U @ v for v in vs]) for vs in values]

    eager = run()
    la.sum(la.stack(eager)).backward()
    want_grad, U.grad = U.grad, None
    with la.batching() as scope:
        got = run()
        la.sum(la.stack(got)).backward()
    adds = [sizes for label, sizes in scope.stats.per_signature.items() if label.startswith("add")]
    assert len(adds) == 1 and len(adds[0]) == 3, scope.stats.per_signature
    for g, e, vs in zip(got, eager, values):
        want = np.sum([U.asnumpy() @ v for v in vs], axis=0)
        np.testing.assert_allclose(g.asnumpy(), want, rtol=1e-5)
        np.testing.assert_allclose(e.asnumpy(), want, rtol=1e-5)
    np.testing.assert_allclose(U.grad, want_grad, rtol=1e-5)
    with pytest.raises(la.ShapeError, match="child_sum"):
        la.child_sum([])


#: the array API namespace (``x.__array_namespace__()``) against numpy 2's, which follows the
#: standard: each call on LazyArrays (eagerly, and recorded in a scope) equals it on ndarrays
ARRAY_API = {
    "zeros": lambda xp, x, y, v: xp.zeros((2, 3)), "ones": lambda xp, x, y, v: xp.ones(3, dtype=xp.float32),
    "full": lambda xp, x, y, v: xp.full((2,), 1.5), "zeros_like": lambda xp, x, y, v: xp.zeros_like(x),
    "ones_like": lambda xp, x, y, v: xp.ones_like(x, dtype=xp.int32), "full_like": lambda xp, x, y, v: xp.full_like(x, 2),
    "arange": lambda xp, x, y, v: xp.arange(1, 7, 2), "linspace": lambda xp, x, y, v: xp.linspace(0, 1, 5),
    "eye": lambda xp, x, y, v: xp.eye(3, k=1), "asarray": lambda xp, x, y, v: xp.add(xp.asarray([1.0, 2.0]), v[:2]),
    "tril": lambda xp, x, y, v: xp.tril(x), "triu": lambda xp, x, y, v: xp.triu(x, k=1),
    "abs": lambda xp, x, y, v: xp.abs(x), "pow": lambda xp, x, y, v: xp.pow(xp.abs(x), 1.5),
    "log2": lambda xp, x, y, v: xp.log2(xp.abs(x) + 1), "log10": lambda xp, x, y, v: xp.log10(xp.abs(x) + 1),
    "tan": lambda xp, x, y, v: xp.tan(x), "cosh": lambda xp, x, y, v: xp.cosh(x), "sin": lambda xp, x, y, v: xp.sin(x),
    "reciprocal": lambda xp, x, y, v: xp.reciprocal(x), "logaddexp": lambda xp, x, y, v: xp.logaddexp(x * 30, y),
    "sign": lambda xp, x, y, v: xp.sign(x), "atan2": lambda xp, x, y, v: xp.atan2(x, y),
    "acos": lambda xp, x, y, v: xp.acos(xp.tanh(x)), "floor": lambda xp, x, y, v: xp.floor(x * 3),
    "hypot": lambda xp, x, y, v: xp.hypot(x, 2.0), "expm1": lambda xp, x, y, v: xp.expm1(x), "isnan": lambda xp, x, y, v: xp.isnan(xp.where(x > 0, x, xp.nan)),
    "isinf": lambda xp, x, y, v: xp.isinf(xp.where(x > 0, x, -xp.inf)),
    "isfinite": lambda xp, x, y, v: xp.isfinite(xp.where(x > 0, x, xp.inf)),
    "logical_and": lambda xp, x, y, v: xp.logical_and(x > 0, y), "logical_or": lambda xp, x, y, v: xp.logical_or(x, y > 0),
    "logical_xor": lambda xp, x, y, v: xp.logical_xor(x > 0, y > 0), "logical_not": lambda xp, x, y, v: xp.logical_not(x > 0),
    "bitwise_invert": lambda xp, x, y, v: xp.bitwise_invert(x > 0), "where": lambda xp, x, y, v: xp.where(x > y, x, y),
    "clip": lambda xp, x, y, v: xp.clip(x, min=-0.5, max=0.5), "clip(max)": lambda xp, x, y, v: xp.clip(x, max=0.1),
    "astype": lambda xp, x, y, v: xp.astype(x, xp.float64), "broadcast_to": lambda xp, x, y, v: xp.broadcast_to(v, (3, 4)),
    "broadcast_arrays": lambda xp, x, y, v: xp.broadcast_arrays(x, v)[1],
    "concat": lambda xp, x, y, v: xp.concat([x, y], axis=1), "stack": lambda xp, x, y, v: xp.stack([x, y], axis=-1),
    "expand_dims": lambda xp, x, y, v: xp.expand_dims(x, axis=1),
    "squeeze": lambda xp, x, y, v: xp.squeeze(xp.expand_dims(x, axis=0), axis=0),
    "reshape": lambda xp, x, y, v: xp.reshape(x, (2, 6)), "permute_dims": lambda xp, x, y, v: xp.permute_dims(x, (1, 0)),
    "matrix_transpose": lambda xp, x, y, v: xp.matrix_transpose(xp.reshape(x, (3, 2, 2))),
    "moveaxis": lambda xp, x, y, v: xp.moveaxis(xp.reshape(x, (3, 2, 2)), 0, -1),
    "moveaxis(several)": lambda xp, x, y, v: xp.moveaxis(xp.reshape(x, (3, 2, 2)), (0, 1), (2, 0)),
    "flip": lambda xp, x, y, v: xp.flip(x, axis=1), "flip(all)": lambda xp, x, y, v: xp.flip(x),
    "unstack": lambda xp, x, y, v: xp.unstack(x, axis=1)[2], "tile": lambda xp, x, y, v: xp.tile(x, (2, 1)),
    "repeat": lambda xp, x, y, v: xp.repeat(x, 2, axis=0), "roll": lambda xp, x, y, v: xp.roll(x, 1, axis=1),
    "roll(flat)": lambda xp, x, y, v: xp.roll(x, -3), "roll(axes)": lambda xp, x, y, v: xp.roll(x, (1, 5), axis=(0, 1)),
    "diff": lambda xp, x, y, v: xp.diff(x, axis=0), "diff(n=2)": lambda xp, x, y, v: xp.diff(x, n=2),
    "meshgrid": lambda xp, x, y, v: xp.meshgrid(v, x[:, 0])[0], "meshgrid(ij)": lambda xp, x, y, v: xp.meshgrid(
        v, x[:, 0], indexing="ij")[1],
    "take": lambda xp, x, y, v: xp.take(x, np.array([2, 0]), axis=1),
    "argmax": lambda xp, x, y, v: xp.argmax(x, axis=1), "argmin": lambda xp, x, y, v: xp.argmin(x, keepdims=True),
    "max": lambda xp, x, y, v: xp.max(x, axis=0), "min": lambda xp, x, y, v: xp.min(x),
    "mean": lambda xp, x, y, v: xp.mean(x, axis=(0, 1), keepdims=True), "sum": lambda xp, x, y, v: xp.sum(x, axis=1),
    "all": lambda xp, x, y, v: xp.all(x > -1, axis=1), "any": lambda xp, x, y, v: xp.any(x > 1),
    "var": lambda xp, x, y, v: xp.var(x, axis=1, correction=1), "std": lambda xp, x, y, v: xp.std(x),
    "count_nonzero": lambda xp, x, y, v: xp.count_nonzero(x > 0, axis=0),
    "matmul": lambda xp, x, y, v: xp.matmul(x, xp.matrix_transpose(y)),
    "tensordot": lambda xp, x, y, v: xp.tensordot(x, y), "tensordot(1)": lambda xp, x, y, v: xp.tensordot(x, v, axes=1),
    "tensordot(pairs)": lambda xp, x, y, v: xp.tensordot(x, y, axes=([0], [0])),
    "vecdot": lambda xp, x, y, v: xp.vecdot(x, y),
}


@pytest.mark.parametrize("name", list(ARRAY_API))
def test_array_api_namespace_equals_numpys_and_records(name):
    call = ARRAY_API[name]
    x, y, v = f32(3, 4), f32(3, 4), f32(4)
    want = call(np, x, y, v)
    xp = la.array(x).__array_namespace__()
    got = call(xp, la.array(x), la.array(y), la.array(v))
    with la.batching() as scope:
        recorded = [call(xp, la.array(x), la.array(y), la.array(v)) for _ in range(2)]
        assert all(isinstance(r, la.LazyArray) for r in recorded)
    assert scope.stats.flushes == 0
    for g in [got, *recorded]:
        assert g.shape == np.shape(want) and g.dtype == np.asarray(want).dtype, (g, want)
        np.testing.assert_allclose(g.asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_array_api_metadata_and_discovery():
    x = la.array(f32(2))
    xp = x.__array_namespace__()
    assert xp.result_type(x, xp.float64) == np.float64 and xp.can_cast(x, xp.float64)
    assert xp.finfo(x).eps == np.finfo(np.float32).eps and xp.isdtype(x.dtype, "real floating")
    assert xp.broadcast_shapes((2, 1), (3,)) == (2, 3) and xp.__array_api_version__ == "2023.12"
    with pytest.raises(ValueError, match="2023.12"):
        x.__array_namespace__(api_version="2099.01")
    compat = pytest.importorskip("array_api_compat")
    assert compat.array_namespace(x) is xp
