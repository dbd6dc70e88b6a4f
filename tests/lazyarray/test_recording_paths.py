"""Common forms of user code record through the generated stubs and recorders, not the generic
path (or a flush) on every call, and give eager's values: state tuples passed to cells, views of
parameters (W.T @ x), scalar constants passed to cells, joins with parameters or numpy items."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.scope import Scope

H = 4
rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture
def generic(monkeypatch):
    """Counts calls of the generic recording paths and the flushes of the active scope."""
    calls = []
    record, record_cell = Scope.record, Scope.record_cell
    monkeypatch.setattr(Scope, "record", lambda self, op, *a: calls.append(op.name) or record(self, op, *a))
    monkeypatch.setattr(Scope, "record_cell", lambda self, c, *a: calls.append(c.name) or record_cell(self, c, *a))
    return calls


# -- tuple / list arguments of cells -------------------------------------------------------
def test_cell_with_a_state_tuple_neither_flushes_nor_goes_generic(generic):
    """``step(x, (h, c))``: the tuple was converted with np.array, forcing h and c (one flush per
    call, ~95 µs) and taking the generic path every call."""
    W = la.parameter(f32(H, H))

    @la.cell
    def step(x, state):
        h, c = state
        c2 = la.sigmoid(W @ x + h) * c
        return la.tanh(c2), c2

    @la.cell
    def nested(x, states):
        (h1, c1), [h2] = states
        return la.tanh(W @ x + h1 * c1 - h2)

    xs = [f32(H) for _ in range(5)]

    def run():
        h, c = la.array(np.zeros(H, np.float32)), la.array(np.ones(H, np.float32))
        out = []
        for i, x in enumerate(xs):
            h, c = step(la.array(x), (h, c))
            out.append(nested(la.array(x), ((h, c), [la.tanh(h)])))
            out.append(step(la.array(x), [h, c])[0])
            if i == 0:
                generic.clear()
        return out

    eager = [o.asnumpy() for o in run()]
    with la.batching() as scope:
        got = run()
        assert generic == []
    assert scope.stats.flushes == 0
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-5)


def test_a_tuple_of_numbers_is_still_one_array_argument():
    @la.cell
    def scale(x, ab):
        return x * ab

    x = f32(2)
    with la.batching():
        got = scale(la.array(x), (2.0, 3.0))
    np.testing.assert_allclose(got.asnumpy(), x * np.array([2.0, 3.0]), rtol=1e-6)


# -- views of parameters (W.T, W[1:3], W.reshape) ------------------------------------------
def test_views_of_parameters_are_parameters_and_record_without_the_generic_path(generic):
    """``W.T @ x`` ran W.T eagerly through the generic path every call, then copied it into an
    input node (generic again): ~12 µs a call and one stacked copy of W per call. Now W.T is a
    parameter viewing W (one per view, kept): the product batches as a shared weight, and an
    in-place update of W between scopes is seen."""
    W = la.parameter(f32(H, H))
    E = la.parameter(f32(6, H))
    xs = [f32(H) for _ in range(4)]

    def run():
        out = []
        for i, x in enumerate(xs):
            x = la.array(x)
            out += [W.T @ x, W[1:3] @ x, la.tanh(W.reshape(-1)[:H] * x), E.transpose()[:, 0] + x[0],
                    x @ W.T, W.T.T @ x]
            if i == 0:
                generic.clear()
        return out

    for scope_no in range(2):
        eager = [o.asnumpy() for o in run()]
        with la.batching() as scope:
            got = run()
            assert generic == [], generic
        for g, e in zip(got, eager):
            np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-5)
        lines = [line for line in scope.explain().splitlines() if "matmul" in line and "transpose" in line]
        assert lines and all("input" not in line for line in lines), scope.explain()
        W.asnumpy()[...] *= -0.5            # in place, between scopes: the views see it
    assert W.T is not None


def test_views_of_parameters_in_a_cell_body_are_still_refused():
    W = la.parameter(np.eye(3, dtype=np.float32))
    with la.batching():
        W.T @ la.array(np.ones(3, np.float32))      # op level: a view parameter now
    c = la.cell(lambda x: W.T @ x)
    with pytest.raises(la.CellError, match="parameters and\\s+constants only"):
        with la.batching():
            c(la.array(np.ones(3, np.float32)))


# -- scalar constants as cell arguments -----------------------------------------------------
def test_scalar_constant_arguments_take_the_generated_recorder(generic):
    """``step(x, h, 0.5)`` / ``step(x, h, True)``: floats, bools and numpy scalars were 'other'
    arguments, so the cell never got a recorder for them: the generic path every call (~2.1 µs
    instead of ~0.6). Keyed by value as the generic path keys them: each value its own trace,
    zeros by sign, NaNs alike."""
    W = la.parameter(f32(H, H))

    @la.cell
    def step(x, h, scale, flip):
        y = la.tanh(W @ x + h) * scale
        return -y if flip else y

    @la.cell
    def div(x, d):
        return x / d

    xs = [f32(H) for _ in range(3)]
    consts = [(0.5, True), (0.5, False), (2.0, True), (np.float32(0.25), np.bool_(False)), (0.5, True)]
    zeros = [0.0, -0.0, float("nan"), 0.0, -0.0, float("nan")]

    def run():
        out = []
        for i, x in enumerate(xs):
            x, h = la.array(x), la.array(xs[i - 1])
            out += [step(x, h, s, f) for s, f in consts]
            out += [div(x, z) for z in zeros]
            if i == 0:
                generic.clear()
        return out

    with np.errstate(divide="ignore", invalid="ignore"):
        eager = [o.asnumpy() for o in run()]
        with la.batching():
            got = run()
            assert generic == [], generic
        for g, e in zip(got, eager):
            np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-5)
            assert g.dtype == e.dtype


# -- concatenate / stack of lists holding parameters or numpy data ---------------------------
def test_joins_with_parameters_or_numpy_items_take_the_generated_stub(generic):
    """``la.concatenate([x, b])`` (a learned padding or initial state), ``[x, features[t]]``:
    the stub took futures only, so the generic path ran every call (~2.4-4 µs instead of
    0.7-1.8). The numpy items are copied into input nodes, as the generic path does."""
    b = la.parameter(f32(2))
    V = la.parameter(f32(H, H + 2))
    buf = np.zeros(H, np.float32)
    xs = [f32(H) for _ in range(4)]

    def run():
        out = []
        for i, x in enumerate(xs):
            buf[:] = x * 2             # a reused buffer: each call must keep the value it had
            x = la.tanh(la.array(x))
            out += [la.tanh(V @ la.concatenate([x, b])), la.concatenate([b, x, b]), la.stack([x, buf]),
                    la.concatenate([buf, x], axis=0), la.stack([x, buf, x], axis=1)]
            if i == 0:
                generic.clear()
        return out

    eager = [o.asnumpy().copy() for o in run()]
    with la.batching():
        got = run()
        assert generic == [], generic
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-5)
    with la.batching():                  # parameters only: a constant, as before
        np.testing.assert_allclose(la.concatenate([b, b]).asnumpy(), np.concatenate([b.asnumpy()] * 2))
