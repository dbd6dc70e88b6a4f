"""LazyArray's own protocol (metadata, conversions, iteration, repr, backends) behaves like the
numpy array it stands for, on futures and on concrete values alike."""
import copy
import operator
import pickle
import subprocess
import sys

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


def test_repr_and_str_show_values_once_computed_and_never_force():
    """``print(x)`` showed no values, even computed ones."""
    v = np.array([1.5, -2.0], np.float32)
    P = la.parameter(v, name="P")
    assert repr(P) == "LazyArray([ 1.5, -2. ], dtype=float32, parameter='P')"
    assert repr(la.array(v)) == "LazyArray([ 1.5, -2. ], dtype=float32)" and str(la.array(v)) == str(v)
    with la.batching() as scope:
        y = la.array(v) * 2
        assert repr(y) == str(y) == "LazyArray(future, shape=(2,), dtype=float32)"
        assert scope.stats.flushes == 0
        y.asnumpy()                     # computed: shown from now on, inside the scope too
        assert repr(y) == "LazyArray([ 3., -4.], dtype=float32)"
        z = y + 1
    assert str(z) == str(v * 2 + 1) and scope.stats.flushes == 1


def test_format_works_on_0d_values_as_numpy():
    """``f"{loss:.2f}"`` raised TypeError."""
    x = la.array(np.float32(0.125))
    with la.batching():
        loss = la.sum(la.array(np.arange(4, dtype=np.float32)))
        assert f"{loss:.2f}" == "6.00"          # a conversion, as float(loss): it forces
    assert f"{x:.3f}" == "0.125" and f"{x}" == str(np.float32(0.125))
    with pytest.raises(TypeError, match="0-d"):
        f"{la.array(np.ones(2)):.2f}"
    with pytest.raises(TypeError):
        f"{np.ones(2):.2f}"                     # (numpy refuses it too)


def test_item_assignment_is_refused_with_a_message():
    with la.batching():
        y = la.tanh(la.array(np.ones(3, np.float32)))
        with pytest.raises(TypeError, match="item assignment.*la.where"):
            y[0] = 1.0
    with pytest.raises(TypeError, match="asnumpy"):
        y[0] = 1.0


def test_dlpack_hands_over_the_value_without_a_copy():
    torch = pytest.importorskip("torch")
    P = la.parameter(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = torch.from_dlpack(P)
    t[0, 0] = 9.0
    assert P.asnumpy()[0, 0] == 9.0
    with la.batching():
        y = la.tanh(P)
    np.testing.assert_allclose(torch.from_dlpack(y).numpy(), np.tanh(P.asnumpy()))
    assert np.from_dlpack(y) is not None


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


@pytest.mark.parametrize("copy", [lambda a: pickle.loads(pickle.dumps(a)), copy.deepcopy, copy.copy],
                         ids=["pickle", "deepcopy", "copy"])
def test_a_copied_or_unpickled_parameter_is_a_new_parameter(copy):
    """A pickled (or copied) parameter kept the process-local id of its original (in another
    process: of whichever parameter has that id there), so a batched ``W2 @ x`` ran the other
    parameter's weights."""
    W1 = la.parameter(np.eye(3, dtype=np.float32), name="W1")
    W2 = copy(W1)
    assert W2.is_parameter and W2 is not W1
    np.asarray(W2)[...] = 7     # an optimizer step on the copy only
    x = np.ones(3, np.float32)
    with la.batching():
        a, b = W1 @ x, W2 @ x
    np.testing.assert_array_equal(a.asnumpy(), [1, 1, 1])
    np.testing.assert_array_equal(b.asnumpy(), [21, 21, 21])
    np.testing.assert_array_equal(np.asarray(W2 @ x), [21, 21, 21])


def test_an_unpickled_value_keeps_its_shape_and_dtype():
    """Class ids are process-local: a pickled handle kept its id, naming another class."""
    eager, future = _values(np.arange(6, dtype=np.float32).reshape(2, 3))
    for x in (eager, future):
        y = pickle.loads(pickle.dumps(x))
        assert (y.shape, y.dtype, y.is_parameter) == (x.shape, x.dtype, False)
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


def test_a_parameter_pickled_in_one_process_is_its_own_in_another(tmp_path):
    """The issue's repro: in the loading process another parameter already had the id."""
    path = tmp_path / "W.pkl"
    dump = ("import pickle, numpy as np, lazyarray as la\n"
            f"pickle.dump(la.parameter(np.eye(3, dtype=np.float32), name='W'), open({str(path)!r}, 'wb'))")
    load = ("import pickle, numpy as np, lazyarray as la\n"
            "V = la.parameter(np.full((3, 3), 7, np.float32), name='V')\n"
            f"W = pickle.load(open({str(path)!r}, 'rb'))\n"
            "x = np.ones(3, np.float32)\n"
            "with la.batching():\n    a = W @ x; b = V @ x\n"
            "print(np.asarray(a).tolist(), np.asarray(b).tolist())")
    subprocess.run([sys.executable, "-c", dump], check=True)
    out = subprocess.run([sys.executable, "-c", load], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["[1.0,", "1.0,", "1.0]", "[21.0,", "21.0,", "21.0]"]
