"""Common forms of user code record through the generated stubs and recorders, not the generic
path (or a flush) on every call, and give eager's values: state tuples passed to cells, views of
parameters (W.T @ x), scalar constants passed to cells, joins with parameters or numpy items."""
from dataclasses import dataclass
from typing import NamedTuple

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


def batched_like_eager(run, generic, rtol=1e-5):
    """``run()`` eagerly, then in a scope where (``run`` clears ``generic`` after its first
    instance, when each signature has been seen) nothing may take the generic path; the values
    and dtypes must be eager's. Returns the scope."""
    eager = [o.asnumpy() for o in run()]
    with la.batching() as scope:
        got = run()
        assert generic == [], generic
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=rtol)
        assert g.dtype == e.dtype
    return scope


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

    assert batched_like_eager(run, generic).stats.flushes == 0


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
        scope = batched_like_eager(run, generic)
        lines = [line for line in scope.explain().splitlines() if "matmul" in line and "transpose" in line]
        assert lines and all("input" not in line for line in lines), scope.explain()
        W.asnumpy()[...] *= -0.5            # in place, between scopes: the views see it
    assert W.T is not None


def test_views_of_parameters_in_a_cell_body_are_parameters():
    """``W.T @ x`` in a body reads the view parameter (one shared operand for the batch), so it
    sees in-place updates of W between scopes, as eagerly."""
    W = la.parameter(f32(3, 3))
    c = la.cell(lambda x: la.tanh(W.T @ x + W[0]))
    xs = [f32(3) for _ in range(4)]
    for update in (False, True):
        if update:
            W.asnumpy()[...] *= -2
        with la.batching():
            got = [c(la.array(x)) for x in xs]
        for g, x in zip(got, xs):
            np.testing.assert_allclose(g.asnumpy(), np.tanh(W.asnumpy().T @ x + W.asnumpy()[0]), rtol=1e-5)


def test_views_of_parameters_pass_gradients_to_their_parameter():
    """A view of a parameter read in a scope (op level and in cell bodies, views of views too)
    was a parameter of its own: its gradient never reached the parameter it views."""
    W = la.parameter(f32(4, 6))
    c = la.cell(lambda x: la.tanh(W.T @ x) * W.T[:, 1])
    xs = [f32(4) for _ in range(3)]

    def loss():
        return la.sum(la.stack([la.sum(la.tanh(W.T @ x) * W[1:3].reshape(12)[:6] + W.T[:, 2] + c(x)) for x in xs]))

    loss().backward()
    eager, W.grad = W.grad, None
    with la.batching():
        loss().backward()
    np.testing.assert_allclose(W.grad, eager, rtol=1e-5, atol=1e-6)
    assert np.abs(eager).min() > 0


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
        batched_like_eager(run, generic)


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


def _full(*shape, fill=None):
    return np.full(shape, fill, np.float32) if fill is not None else np.ones(shape, np.float32)


# -- static arguments are keyed by identity, not equality
class _EqualByName:
    """Modules whose __eq__/__hash__ use their name (plausible: modules kept in dicts/sets)."""

    __slots__ = ()

    def __eq__(self, other):
        return type(other) is type(self) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


class _ByName(_EqualByName):
    def __init__(self, name, scale):
        self.name = name
        self.W = la.parameter(np.full((2, H), scale, np.float32))

    @la.cell
    def __call__(self, x):
        return self.W @ x


def test_equal_but_distinct_static_objects_do_not_share_a_trace():
    m1, m2 = _ByName("enc", 1.0), _ByName("enc", 2.0)
    x = np.arange(H, dtype=np.float32)
    with la.batching():
        a, b = m1(la.array(x)), m2(la.array(x))
    np.testing.assert_allclose(a.asnumpy(), m1.W.asnumpy() @ x)
    np.testing.assert_allclose(b.asnumpy(), m2.W.asnumpy() @ x)    # ran m1's weights: 3 instead of 6


@dataclass
class _Lin:             # eq=True: instances are unhashable
    W: object
    b: object

    @la.cell
    def __call__(self, x):
        return la.tanh(self.W @ x + self.b)


def test_a_dataclass_module_can_be_a_method_cell():
    m = _Lin(la.parameter(_full(2, H)), la.parameter(_full(2, fill=0.0)))
    x = np.arange(H, dtype=np.float32)
    with la.batching():
        got = m(la.array(x))       # CellError: "an argument is neither an array nor hashable"
    np.testing.assert_allclose(got.asnumpy(), m(la.array(x)).asnumpy(), rtol=1e-6)


# -- named tuples and tuples holding numpy arrays as cell arguments
class State(NamedTuple):
    h: object
    c: object


def test_a_named_tuple_state_is_passed_to_the_cell_as_a_named_tuple():
    W = la.parameter(np.eye(H, dtype=np.float32))

    @la.cell
    def step(x, s):
        c = la.sigmoid(W @ x + s.h) * s.c
        return la.tanh(c), c

    def run():
        s = State(la.array(_full(H, fill=0.0)), la.array(_full(H)))
        out = []
        for t in range(3):
            s = State(*step(la.array(_full(H, fill=t)), s))
            out.append(s.h)
        return out

    eager = [o.asnumpy() for o in run()]
    with la.batching() as scope:
        got = run()         # AttributeError: 'LazyArray' object has no attribute 'h' (after a flush)
    assert scope.stats.flushes == 0
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-6)


def test_a_tuple_of_a_scalar_and_numpy_arrays_works_as_eagerly():
    @la.cell
    def f(x, s):
        return x * s[0] + s[1][:H]

    x = np.arange(H, dtype=np.float32)
    calls = [(0.5, np.ones(H, np.float32)), (2.0, np.ones(H + 1, np.float32)), (np.float32(-1), x)]
    eager = [np.asarray(f(la.array(x), s)) for s in calls]
    with la.batching():
        got = [f(la.array(x), s) for s in calls]    # ValueError: inhomogeneous shape (numpy's message)
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-6)


class _Slotted(_EqualByName):
    """Without weak references (``__slots__``): keyed by equality, a second module with the same
    name ran the first one's trace."""

    __slots__ = ("W", "name")

    def __init__(self, W, name):
        self.W, self.name = W, name

    @la.cell
    def f(self, x):
        return la.tanh(self.W @ x)


def test_slotted_modules_equal_by_name_do_not_share_a_trace():
    m1, m2 = _Slotted(la.parameter(f32(H, H)), "enc"), _Slotted(la.parameter(f32(H, H)), "enc")
    xs = [f32(H) for _ in range(3)]

    def run():
        return [m1.f(x) for x in xs] + [m2.f(x) for x in xs]

    eager = _values(run())
    with la.batching():
        out = run()
    for e, b in zip(eager, _values(out)):
        np.testing.assert_allclose(b, e, rtol=1e-5, atol=1e-6)


def test_slotted_bundle_rebound_in_a_closure_retraces():
    p = _Slotted(la.parameter(f32(H, H)), "a")

    @la.cell
    def g(x):
        return la.tanh(p.W @ x)

    x = f32(H)
    with la.batching():
        g(x)
    p = _Slotted(la.parameter(f32(H, H)), "a")     # equal, other weights
    eager = g(x).asnumpy()
    with la.batching():
        out = g(x)
    np.testing.assert_allclose(out.asnumpy(), eager, rtol=1e-5, atol=1e-6)


def _values(xs):
    return [np.array(x.asnumpy()) for x in xs]


def test_labels_tell_views_and_nestings_apart():
    """explain() (and learned policies) group by label: two views of one parameter, or one cell
    called with a tuple and with a list, are different signatures with different labels."""
    W = la.parameter(f32(2 * H, H), name="W")
    step = la.cell(lambda x, hc: la.tanh(x + hc[0]) * hc[1])
    with la.batching() as scope:
        x = la.array(f32(H))
        W[0:H] @ x, W[H:] @ x, step(x, (x, x)), step(x, [x, x])
    lines = scope.explain().splitlines()[1:]
    assert len(lines) == 5 and len({line.split(None, 3)[3] for line in lines}) == 5
    assert any("W.getitem((slice(0, 4, None),))" in line for line in lines)
    assert any("<_, (_, _)>" in line for line in lines) and any("<_, [_, _]>" in line for line in lines)


def test_values_from_outside_the_scope_take_the_stubs_once_they_are_inputs(generic):
    """An initial state made once outside the scope (``h0 = la.array(zeros)``) and a future of
    a finished scope: the first use makes the scope's input node; later uses, by ops and cells,
    find it without the generic path."""
    W = la.parameter(f32(H, H))
    h0 = la.array(f32(H))
    with la.batching():
        old = la.tanh(la.array(f32(H)))
    step = la.cell(lambda x, h: la.tanh(W @ x + h))
    xs = [f32(H) for _ in range(4)]

    def run():
        out = []
        for i, x in enumerate(xs):
            x = la.array(x)
            out += [W @ h0 + x, step(x, h0), step(old, h0), x * old]
            if i == 0:
                generic.clear()
        return out

    scope = batched_like_eager(run, generic)
    (inputs,) = [line.split() for line in scope.explain().splitlines() if "input(" in line]
    assert inputs[1] == "6"     # the four xs, h0 and old: one input node per outside value


def test_numpy_arrays_of_ids_into_a_parameter_take_the_stub(generic):
    """``E[ids]``, a sentence's words in one lookup: keyed by the ids' shape as the generic path
    keys it; out-of-range ids are still numpy's IndexError."""
    E = la.parameter(f32(9, H))
    sentences = [np.array([3, 0, 8]), np.array([1, 1, 2]), np.array([[4, 5], [6, 7]]), np.array([2, 5, 0])]

    def run():
        out = []
        for k, ids in enumerate(sentences):
            out += [E[ids], la.take(E, ids.astype(np.int32), axis=0)]
            if k == 0:
                generic.clear()
        return out

    eager = [o.asnumpy() for o in run()]
    with la.batching():
        got = run()
        assert generic == ["take"]      # the first call with ids of a new shape
        with pytest.raises(IndexError):
            E[np.array([1, 9])]
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e)
