"""LazyArray's own protocol (metadata, conversions, iteration, repr, backends) behaves like the
numpy array it stands for, on futures and on concrete values alike."""
import operator

import numpy as np
import pytest

import lazyarray as la

rng = np.random.default_rng(3)
M = rng.standard_normal((3, 4)).astype(np.float32)
W = la.parameter(M, name="W_array_test")


def _values(a):
    """``a`` as an eager value and as a future of a scope, each as la.tanh(a) would be."""
    eager = la.tanh(la.array(a))
    with la.batching():
        future = la.tanh(la.array(a))
        assert future.asnumpy() is not None    # force inside the scope: recording continues
    return eager, future


@pytest.mark.parametrize("shape", [(), (1,), (5,), (2, 3), (0, 4)])
def test_metadata_matches_numpy(shape):
    a = rng.standard_normal(shape).astype(np.float32)
    for x in _values(a):
        ref = np.tanh(a)
        assert (x.shape, x.dtype, x.ndim, x.size) == (ref.shape, ref.dtype, ref.ndim, ref.size)
        if shape:
            assert len(x) == len(ref)
        else:
            with pytest.raises(TypeError, match="0-d"):
                len(x)
        assert not x.is_parameter
    assert W.is_parameter and W.shape == (3, 4) and W.size == 12


@pytest.mark.parametrize("value, dtype", [(2, np.int64), (2.75, np.float32), (True, np.bool_),
                                          (-3, np.int32)])
def test_scalar_conversions_match_numpy(value, dtype):
    ref = np.array(value, dtype=dtype)
    x = la.array(ref)
    for conv in (float, int, bool, operator.methodcaller("item"), operator.methodcaller("tolist")):
        assert conv(x) == conv(ref) and type(conv(x)) is type(conv(ref))
    if np.issubdtype(dtype, np.integer):
        assert operator.index(x) == operator.index(ref)
        assert [10, 20, 30, 40][x] == [10, 20, 30, 40][int(ref)]


@pytest.mark.parametrize("value", [np.float32(1.7), np.array([1]), np.array(True)])
def test_no_index_where_numpy_has_none(value):
    """A float must not be truncated into an index (a wrong element, silently)."""
    with pytest.raises(TypeError):
        operator.index(np.asarray(value))
    x = la.array(np.asarray(value))
    with pytest.raises(TypeError):
        operator.index(x)
    with pytest.raises(TypeError):
        [10, 20, 30][x]


def test_truth_of_many_values_is_ambiguous_like_numpy():
    with pytest.raises(ValueError, match="ambiguous"):
        bool(la.array(np.zeros(3)))


def test_iteration_yields_rows_in_and_out_of_scope():
    eager = list(la.array(M))
    with la.batching():
        rows = list(W @ la.array(np.eye(4, dtype=np.float32)))    # a future: rows are recorded
        assert all(r.shape == (4,) for r in rows)
    assert [r.shape for r in eager] == [(4,)] * 3
    np.testing.assert_array_equal(np.stack([r.asnumpy() for r in eager]), M)
    np.testing.assert_allclose(np.stack([r.asnumpy() for r in rows]), M, rtol=1e-6)


def test_repr_names_the_kind_shape_and_dtype():
    assert repr(W) == "LazyArray(parameter, shape=(3, 4), dtype=float32)"
    assert repr(la.array(M[0])) == "LazyArray(array, shape=(4,), dtype=float32)"
    with la.batching():
        y = W @ la.array(M[0])
        assert repr(y) == "LazyArray(future, shape=(3,), dtype=float32)"
    assert repr(y) == "LazyArray(array, shape=(3,), dtype=float32)"     # resolved by the exit


def test_to_numpy_keeps_parameters_shared_and_values_equal():
    V = W.to("numpy")
    assert V.is_parameter and V is not W and V._ref != W._ref
    np.testing.assert_array_equal(V.asnumpy(), M)
    x = la.array(M[0]).to("numpy")
    assert not x.is_parameter
    np.testing.assert_array_equal(x.asnumpy(), M[0])
    with la.batching():
        y = W @ la.array(M[0])
        z = y.to("numpy")              # a future: forced, then a concrete array
    np.testing.assert_allclose(z.asnumpy(), M @ M[0], rtol=1e-6)


def test_numpy_copies_are_copies_and_views_are_views():
    """np.array(x) must not hand out the future's own memory (numpy 2 asks __array__ for the
    copy and makes none itself); np.asarray(x) reads it in place, as numpy does for arrays."""
    with la.batching():
        futures = [la.tanh(W @ la.array(M[i])) for i in range(3)]
    for x in (futures[1], la.array(M[0].copy())):
        before = x.asnumpy().copy()
        copied = np.array(x)
        copied[...] = 7
        np.testing.assert_array_equal(x.asnumpy(), before)
        assert np.shares_memory(np.asarray(x), x.asnumpy())
        assert np.asarray(x, dtype=np.float64).dtype == np.float64
        with pytest.raises(ValueError, match="without a copy"):
            np.asarray(x, dtype=np.float64, copy=False)


def test_la_array_copies_like_np_array():
    buf = M[0].copy()
    x = la.array(buf)
    buf[:] = 0
    np.testing.assert_array_equal(x.asnumpy(), M[0])
