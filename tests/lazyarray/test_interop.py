"""numpy interop and numpy's edge semantics, eagerly and batched: numpy's reductions calling our
methods, transpose(None), list axes, 0-d indexing, float16 means."""
import numpy as np
import pytest

import lazyarray as la


def batched(fn, *operands, instances=3):
    with la.batching():
        futures = [fn(*map(la.array, operands)) for _ in range(instances)]
    return [np.asarray(f) for f in futures]


# mean of float16: numpy sums in float32 and rounds once; the batched kernel passed out= (float16),
#    so the sum was rounded (to inf past 65504) before dividing
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_mean_of_float16_sums_in_float32_as_numpy(axis):
    x = np.array([60000, 60000, 60000], np.float16)
    want = np.mean(x, axis=axis)
    assert np.isfinite(want)
    eager = np.asarray(la.mean(la.array(x), axis=axis))
    assert eager.dtype == np.float16 and eager == want
    for got in batched(lambda a: la.mean(a, axis=axis), x):
        assert got.dtype == np.float16 and got == want

    @la.cell
    def body(a):
        return la.mean(a, axis=axis)
    with la.batching():
        futures = [body(la.array(x)) for _ in range(3)]
    for f in futures:
        assert np.asarray(f) == want


# numpy's reductions call the method with out=None (and dtype=None): TypeError before
@pytest.mark.parametrize("fn", [np.sum, np.mean, np.max, np.amax])
def test_numpy_reductions_of_a_lazyarray(fn):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for kwargs in ({}, {"axis": 1}, {"axis": 0, "keepdims": True}):
        want = fn(x, **kwargs)
        got = fn(la.array(x), **kwargs)
        np.testing.assert_array_equal(np.asarray(got), want)
        with la.batching():
            fut = fn(la.array(x) * 1, **kwargs)
        np.testing.assert_array_equal(np.asarray(fut), want)


def test_reduction_methods_refuse_what_they_cannot_honour_by_name():
    x = la.array(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="dtype"):
        np.sum(x, dtype=np.float64)
    with pytest.raises(TypeError, match="out"):
        x.max(0, np.empty(3, np.float32))
    assert np.asarray(x.sum(0)).shape == (3,)
    assert np.asarray(x.mean(axis=1, keepdims=True)).shape == (2, 1)


# np.transpose(x) calls x.transpose(None): a ShapeError ('NoneType' ... integer) before
def test_transpose_none_reverses_as_numpy():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(np.transpose(la.array(x))), x.T)
    np.testing.assert_array_equal(np.asarray(la.array(x).transpose(None)), x.T)
    with la.batching():
        fut = np.transpose(la.array(x) * 1)
    np.testing.assert_array_equal(np.asarray(fut), x.T)


# axis=[0, 1] found the entry of axis=(0, 1) once that was recorded (in any scope of the
#    process): a value in a scope where numpy and eager mode raise
@pytest.mark.parametrize("name", ["sum", "mean", "max"])
def test_list_axis_never_runs_the_tuple_entry(name):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError):
        getattr(np, name)(x, axis=[0, 1])
    with pytest.raises(ValueError):
        getattr(la, name)(la.array(x), axis=[0, 1])
    with la.batching():
        getattr(la, name)(la.array(x), axis=(0, 1))
    with pytest.raises(ValueError), la.batching():
        getattr(la, name)(la.array(x), axis=[0, 1])


# x[0] of a 0-d x: numpy raises IndexError; eager mode returned the value and a scope raised
#    "tuple index out of range"; la.take(x, i, axis=0) of a 0-d x (numpy: the value) failed so too
def test_integer_index_of_a_0d_array_is_an_index_error():
    s = np.array(2.5, np.float32)
    with pytest.raises(IndexError):
        s[0]
    for idx in (0, -1, np.int64(0), [0]):
        with pytest.raises(IndexError, match="0-dimensional"):
            la.array(s)[idx]
        with pytest.raises(IndexError, match="0-dimensional"), la.batching():
            (la.array(s) * 1)[idx]
        with pytest.raises(IndexError, match="0-dimensional"), la.batching():
            la.parameter(s)[idx]


@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("index", [0, -1, [0], [[0, -1]]])
def test_take_along_axis_0_of_a_0d_array_as_numpy(axis, index):
    s = np.array(2.5, np.float32)
    want = np.take(s, index, axis=axis)
    np.testing.assert_array_equal(np.asarray(la.take(la.array(s), index, axis=axis)), want)
    for got in batched(lambda a: la.take(a, index, axis=axis), s):
        assert got.shape == np.shape(want)
        np.testing.assert_array_equal(got, want)
    with la.batching():
        fut = la.take(la.parameter(s), index, axis=axis)
    np.testing.assert_array_equal(np.asarray(fut), want)
    with pytest.raises(IndexError):
        la.take(la.array(s), 1, axis=axis)
    with pytest.raises(IndexError), la.batching():
        la.take(la.array(s) * 1, 1, axis=axis)


# -- boolean masks
@pytest.mark.parametrize("mask", [np.array([True, False, True]), [True, False, True]])
def test_boolean_mask_index_is_refused_eagerly_as_in_a_scope(mask):
    A = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(TypeError):
        la.array(A)[mask]           # eager read True/False as rows 1/0: rows [1, 0, 1], not numpy's [0, 2]
    with pytest.raises(TypeError):
        with la.batching():
            la.array(A)[mask]
