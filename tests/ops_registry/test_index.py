"""pick, pick_log_softmax and take at the edges: a shared (parameter) x with per-node indices,
indices far out of range (never read as a cell's integer-argument sentinel), integer x."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lazyarray as la

SCHEDULERS = ("depth", "agenda", "sufficient")


# -- pick / pick_log_softmax of a shared x (a parameter) with per-node indices --------------

@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("memplan", (False, True))
@pytest.mark.parametrize("fn", (la.pick, la.pick_log_softmax))
@pytest.mark.parametrize("axis", (0, 1, -1))
def test_pick_of_a_parameter_batches(scheduler, memplan, fn, axis):
    W = la.parameter(np.arange(12, dtype=np.float32).reshape(3, 4) / 7)
    idx = (lambda i: [i, 0, -1, 2]) if axis == 0 else (lambda i: [i, -1, 2])
    eager = [np.asarray(fn(W, idx(i), axis=axis)) for i in range(3)]
    with la.batching(scheduler=scheduler, memplan=memplan):
        got = [fn(W, idx(i), axis=axis) for i in range(3)]
    for e, g in zip(eager, got):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-6)


def test_pick_log_softmax_of_a_1d_parameter_many_rows():
    v = la.parameter(np.random.default_rng(0).standard_normal(3000).astype(np.float32))
    eager = [float(la.log_softmax(v)[i]) for i in range(-100, 100)]
    with la.batching():
        got = [la.pick_log_softmax(v, i) for i in range(-100, 100)]
    np.testing.assert_allclose([float(g) for g in got], eager, rtol=1e-5)


def test_pick_of_a_parameter_in_a_cell_body():
    M = la.parameter(np.arange(21, dtype=np.float32).reshape(3, 7))

    @la.cell
    def body(label):
        return la.pick(M[0], label) * 2 + la.pick(M, [0, 1, -1], axis=1)

    eager = [np.asarray(body(k)) for k in range(-7, 7)]
    with la.batching():
        got = [body(k) for k in range(-7, 7)]
    for e, g in zip(eager, got):
        np.testing.assert_array_equal(np.asarray(g), e)


def test_pick_of_a_parameter_is_no_stop_iteration_under_map():
    # the flush raised StopIteration, which map() read as the end of its iterator: no results, no error
    W = la.parameter(np.arange(12, dtype=np.float32).reshape(3, 4))

    def f(i):
        with la.batching():
            y = la.pick(W, [i, 0, 1, 2], axis=0)
        return np.asarray(y)

    assert len(list(map(f, range(3)))) == 3


# -- take of per-node values ---------------------------------------------------------------

@pytest.mark.parametrize("axis", (0, 1, -1, None))
@pytest.mark.parametrize("index", (1, [2, 0], [[0, 1], [2, 2]]), ids=("int", "list", "nested"))
def test_take_of_per_node_values_batches(axis, index):
    """Each node's own x and indices: the batch picks along the node's axis (the first one
    without moving axes: a loss's ``scores[label]``)."""
    xs = [np.arange(12, dtype=np.float32).reshape(3, 4) * (k + 1) for k in range(3)]
    with la.batching() as scope:
        got = [la.take(la.array(x) * 2.0, index, axis=axis) for x in xs]
    assert scope.stats.batches == 3     # the inputs, the products, the takes
    for x, g in zip(xs, got):
        np.testing.assert_array_equal(np.asarray(g), np.take(x * 2.0, index, axis=axis))


# -- indices at or below IndexArg.sentinel_base read as a cell's integer argument ------------

BIG = -(1 << 60)


def test_cell_constant_index_far_out_of_range_raises():
    E = la.parameter(np.arange(12, dtype=np.float32).reshape(4, 3))

    @la.cell
    def body(w):
        return E[w] + E[BIG]        # eager: IndexError; batched read E[w] twice

    with pytest.raises(IndexError):
        body(1)
    with pytest.raises(IndexError):
        with la.batching():
            body(1)


@pytest.mark.parametrize("call", ["E[BIG]", "la.take(E, [BIG, 0], axis=0)", "la.take(E, BIG)",
                                  "la.pick(la.array(np.ones(3, np.float32)), BIG)", "cell(BIG)"])
def test_far_out_of_range_index_raises_at_the_call(call):
    # E[-2**60] in a scope hung in numpy's wrapping take (it loops |index| / n times)
    src = textwrap.dedent(f"""
        import numpy as np, lazyarray as la
        BIG = -(1 << 60)
        E = la.parameter(np.arange(12, dtype=np.float32).reshape(4, 3))
        cell = la.cell(lambda w: E[w] * 2)
        with la.batching():
            try:
                {call}
            except IndexError:
                print("IndexError at the call")
    """)
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "IndexError at the call" in out.stdout


def test_sentinels_still_work_for_cell_integer_arguments():
    E = la.parameter(np.arange(12, dtype=np.float32).reshape(4, 3))

    @la.cell
    def inner(w):
        return E[w] * 2

    @la.cell
    def outer(w, v):
        return inner(w) + E[v] + E[-1]

    eager = [np.asarray(outer(w, v)) for w, v in ((0, 1), (-1, 2), (3, -4))]
    with la.batching():
        got = [outer(w, v) for w, v in ((0, 1), (-1, 2), (3, -4))]
    for e, g in zip(eager, got):
        np.testing.assert_array_equal(np.asarray(g), e)
    with pytest.raises(IndexError):
        with la.batching():
            outer(4, 0)


# -- la.pick_log_softmax of integer x: recorded with x's dtype, then the flush failed ---------

@pytest.mark.filterwarnings("ignore:overflow encountered in exp")   # uint8 wraps, as eagerly
@pytest.mark.parametrize("dtype", (np.int8, np.int32, np.int64, np.uint8))
@pytest.mark.parametrize("width", (5, 100))
def test_pick_log_softmax_of_integers(dtype, width):
    rng = np.random.default_rng(0)
    xs = [rng.integers(0, 4, width).astype(dtype) for _ in range(4)]
    eager = [np.asarray(la.pick_log_softmax(la.array(x), i)) for i, x in enumerate(xs)]
    with np.errstate(all="ignore"):
        with la.batching():
            got = [la.pick_log_softmax(la.array(x), i) for i, x in enumerate(xs)]
            assert [g.dtype for g in got] == [e.dtype for e in eager]
    for e, g in zip(eager, got):
        np.testing.assert_array_equal(np.asarray(g), e)


def test_pick_log_softmax_of_integers_along_an_axis_and_fused():
    x = np.arange(12, dtype=np.int64).reshape(3, 4) % 5
    eager = [np.asarray(la.pick_log_softmax(la.array(x), [0, -1, 2], axis=1)),
             np.asarray(la.log_softmax(la.array(x[0]))[2])]
    with la.batching():
        got = [la.pick_log_softmax(la.array(x), [0, -1, 2], axis=1), la.log_softmax(la.array(x[0]))[2]]
    for e, g in zip(eager, got):
        assert np.asarray(g).dtype == e.dtype
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-12)
