"""Cells: one node per call, traced once per signature, equal to eager; errors for bodies a
static subgraph cannot hold."""
import importlib
import itertools
import os
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyarray as la
from lazyarray.plancache import PLANS

rng = np.random.default_rng(3)
H = 4


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


E = la.parameter(f32(9, H), name="E")
U = la.parameter(f32(5 * H, 2 * H), name="U")
b = la.parameter(f32(5 * H), name="b")
W_out = la.parameter(f32(5, H), name="W_out")


@la.cell
def leaf(word):
    x = la.tanh(E[word])
    return x, x * 0.5


@la.cell
def internal(hl, cl, hr, cr):
    i, fl, fr, o, u = la.split(U @ la.concatenate([hl, hr]) + b, 5)
    c = la.sigmoid(i) * la.tanh(u) + la.sigmoid(fl) * cl + la.sigmoid(fr) * cr
    return la.sigmoid(o) * la.tanh(c), c


@la.cell
def loss(h, label):
    return -la.log_softmax(W_out @ h)[label]


def encode(tree, losses):
    if isinstance(tree, int):
        h, c = leaf(tree)
    else:
        h, c = internal(*encode(tree[0], losses), *encode(tree[1], losses))
    losses.append(loss(h, len(losses) % 5))
    return h, c


TREES = [((1, 2), 3), (4, (5, (6, 7))), 8, ((0, 1), (2, 3))]


def tree_loss(tree):
    losses = []
    encode(tree, losses)
    return la.sum(la.stack(losses))


@pytest.mark.parametrize("scheduler", ["depth", "agenda"])
def test_cells_equal_eager_and_record_one_node_per_call(scheduler):
    eager = [float(tree_loss(t)) for t in TREES]
    with la.batching(scheduler=scheduler) as scope:
        got = [tree_loss(t) for t in TREES]
    np.testing.assert_allclose([float(g) for g in got], eager, rtol=1e-4, atol=1e-6)
    calls = sum(2 * n - 1 for n in (3, 4, 1, 4)) * 2  # node cells + loss cells
    stacks = len(TREES) * 2  # stack + sum per tree
    assert scope.stats.nodes == calls + stacks
    explained = scope.explain()
    assert "cell internal(" in explained and "cell leaf(int)" in explained


@pytest.mark.parametrize("scheduler", ["depth", "agenda", "sufficient", "fsm"])
@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("memplan", [False, True])
def test_gradients_through_cells_that_call_cells(scheduler, force, memplan):
    """The TreeLSTM cells above, each internal node's state then put through a cell of its own
    with separate gate weights (merged into one product: ``lazyarray.arrange``): the split's
    parts, the nested cell, the merged gates and the table read by rows pass every parameter
    the eager gradient. ``force``: the first tree's loss is forced first, so the backward
    computes its bodies again."""
    values = np.random.default_rng(5)
    Wi, Wf, Wg = (la.parameter(values.standard_normal((H, H)).astype(np.float32)) for _ in range(3))
    bi, bf, bg = (la.parameter(values.standard_normal(H).astype(np.float32)) for _ in range(3))
    params = [E, U, b, W_out, Wi, Wf, Wg, bi, bf, bg]

    @la.cell
    def gated(x, h):
        return la.sigmoid(Wi @ x + bi) * la.tanh(Wg @ h + bg) + la.sigmoid(Wf @ x + bf) * h

    @la.cell
    def node(hl, cl, hr, cr):
        h, c = internal(hl, cl, hr, cr)
        return gated(h, c), c

    def tree(t, losses):
        h, c = leaf(t) if isinstance(t, int) else node(*tree(t[0], losses), *tree(t[1], losses))
        losses.append(loss(h, len(losses) % 5))
        return h, c

    def total():
        out = []
        for t in TREES:
            losses = []
            tree(t, losses)
            out.append(la.sum(la.stack(losses)))
            if force and len(out) == 1:
                float(out[0])
        la.sum(la.stack(out)).backward()

    def grads():
        out = [np.array(p.grad) for p in params]
        for p in params:
            p.grad = None
        return out

    for p in params:        # the module's parameters may hold another test's gradients
        p.grad = None
    total()
    want = grads()
    with la.batching(scheduler=scheduler, memplan=memplan):
        total()
    for k, (g, e) in enumerate(zip(grads(), want)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=f"parameter {k}")


def test_cells_mix_with_ops_and_call_cells():
    @la.cell
    def two_steps(h, c):
        h1, c1 = internal(h, c, h, c)
        return internal(h1, c1, h, c)[0]

    xs = [(f32(H), f32(H)) for _ in range(5)]
    eager = [(two_steps(la.tanh(h), c) * 2).asnumpy() for h, c in xs]
    with la.batching() as scope:
        got = [two_steps(la.tanh(h), c) * 2 for h, c in xs]
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-4, atol=1e-6)
    assert scope.stats.batches == 4  # inputs, tanh, the cell, the multiply



def test_a_cell_passes_its_integer_arguments_to_the_cells_it_calls():
    @la.cell
    def outer(word, label):
        return loss(leaf(word)[0], label) + 1.0

    calls = [(1, 0), (4, 3), (8, 2)]
    eager = [float(outer(w, k)) for w, k in calls]
    with la.batching():
        got = [outer(w, k) for w, k in calls]
    np.testing.assert_allclose([float(g) for g in got], eager, rtol=1e-5)
    assert len(set(eager)) == 3
    with pytest.raises(IndexError, match="cell .*outer.* 9 is out of range for an axis of size 9"):
        with la.batching():
            outer(9, 0)

@pytest.mark.parametrize("index", ["getitem", "pick", "take"])
def test_values_read_at_several_integer_arguments_run_member_by_member(index):
    """A hinge ``relu(1 - s[good] + s[wrong])``: the two reads of the same scores differ only in
    their integer arguments, so they run one by one on the scores ("calls"), not on the scores
    joined twice; values and gradients as eagerly."""
    read = {"getitem": lambda s, i: s[i], "pick": la.pick, "take": lambda s, i: la.take(s, i)}[index]
    W = la.parameter(f32(3, 4))

    @la.cell
    def hinge(x, good, wrong):
        s = W @ x
        return la.relu(1 - read(s, good) + read(s, wrong))

    calls = [(f32(4), g, w) for g, w in [(0, 1), (2, 0), (1, 2), (2, 1)]]
    eager = [hinge(*c) for c in calls]
    la.sum(la.stack(eager)).backward()
    want, W.grad = W.grad, None
    with la.batching():
        got = [hinge(*c) for c in calls]
        la.sum(la.stack(got)).backward()
    np.testing.assert_allclose([float(g) for g in got], [float(e) for e in eager], rtol=1e-5)
    np.testing.assert_allclose(W.grad, want, rtol=1e-5)
    assert W.grad.any()
    plans = [p.plan for p in importlib.import_module("lazyarray.scope").SIGNATURES.table.payload
             if getattr(p, "kind", None) == "cell" and p.plan.name == hinge.name]
    assert plans and all("calls" in [step.mode for step in plan.steps] for plan in plans)


def test_body_is_traced_once_per_signature():
    traces = []

    @la.cell
    def f(x):
        traces.append(x.shape)
        return la.tanh(x)

    with la.batching():
        for _ in range(5):
            f(f32(3))
        f(f32(2))
    with la.batching():
        f(f32(3))
    assert traces == [(3,), (2,)]


def test_rebinding_what_a_body_closes_over_retraces():
    """One cell, its closed-over scalar, parameter and list rebound between calls (in one scope
    and across scopes): every call sees the current values, as the body run eagerly would."""
    scale, weight, weights = 2.0, E, [E]

    @la.cell
    def body(word):
        return weights[0][word] * scale + weight[word]

    def eager(word):
        return weights[0].asnumpy()[word] * scale + weight.asnumpy()[word]

    other = la.parameter(f32(9, H))
    settings = [(2.0, E, [E]), (3.0, E, [E]), (3.0, other, [E]), (3.0, other, [other]), (2, E, [E])]
    calls = []
    with la.batching():
        for scale, weight, weights in settings:
            calls.append((body(4), eager(4)))
    for scale, weight, weights in settings:
        with la.batching():
            calls.append((body(5), eager(5)))
    for got, want in calls:
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)


class _Layer:
    def __init__(self, W):
        self.W = W


class _Model:
    def __init__(self, W, inner):
        self.W, self.layers, self.by_name = W, [_Layer(inner)], {"inner": inner}


def test_rebinding_a_parameter_in_a_bundle_is_seen_between_scopes_and_refused_inside_one():
    """``P.W = la.parameter(new)`` after a cell ran (a functional update): the trace kept the
    old weights while op-level and eager code used the new ones. A bundle passed as an
    argument, closed over or held in a global, and attributes of its attributes, lists and
    dicts, are all seen; inside one scope the recorded calls cannot change, so it refuses."""
    P = _Model(la.parameter(np.eye(3, dtype=np.float32)), la.parameter(np.eye(3, dtype=np.float32)))

    @la.cell
    def passed(P, x):
        return P.W @ (P.layers[0].W @ x)

    @la.cell
    def closed(x):
        return P.by_name["inner"] @ x

    x = np.array([1.0, 2.0, 3.0], np.float32)

    def check():
        with la.batching():
            got = passed(P, la.array(x)), closed(la.array(x))
        want = P.W.asnumpy() @ P.layers[0].W.asnumpy() @ x, P.by_name["inner"].asnumpy() @ x
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-6)
            np.testing.assert_allclose(g.asnumpy(), np.asarray(w), rtol=1e-6)

    check()
    for step in range(3):
        P.W = la.parameter(P.W.asnumpy() * 2)
        check()
        P.layers[0].W = la.parameter(P.layers[0].W.asnumpy() + 1)
        check()
        P.by_name["inner"] = la.parameter(P.by_name["inner"].asnumpy() * 3)
        check()
    with pytest.raises(la.CellError, match="rebound"):
        with la.batching():
            passed(P, la.array(x))
            P.W = la.parameter(P.W.asnumpy() * 2)
            passed(P, la.array(x))
    check()


SCALE = 2.0
WEIGHT = E


@la.cell
def reads_globals(word):
    return WEIGHT[word] * SCALE


def test_rebinding_a_module_global_the_body_reads_retraces():
    global SCALE, WEIGHT
    other = la.parameter(f32(9, H))
    try:
        for SCALE, WEIGHT in [(2.0, E), (3.0, E), (3.0, other), (3, other)]:
            with la.batching():
                y = reads_globals(1)
            np.testing.assert_allclose(y.asnumpy(), WEIGHT.asnumpy()[1] * SCALE, rtol=1e-6)
    finally:
        SCALE, WEIGHT = 2.0, E


def test_int_and_float_constants_do_not_share_a_trace():
    """1 == 1.0 in Python, but an int array times 1 stays int and times 1.0 becomes float."""
    factor = 1

    @la.cell
    def times(x):
        return x * factor

    ints = np.arange(3, dtype=np.int32)
    for factor in (1, 1.0, True):
        with la.batching():
            y = times(ints)
        assert y.asnumpy().dtype == (ints * factor).dtype


def test_an_integer_argument_no_int64_holds_fails_its_call_and_then_the_flush():
    """The graph holds int64s: a cell's integer argument that nothing bounds (it indexes no axis)
    fails the call that passes 2**64, and a scope that goes on past the error fails its flush
    (the node's slots were half written) rather than reading every later node's slots shifted."""
    ignores = la.cell(lambda x, k: la.tanh(x))
    with pytest.raises(ValueError, match="half appended"):
        with la.batching():
            x = la.array(np.ones(2, np.float32))
            ignores(x, 1)
            with pytest.raises(OverflowError):
                ignores(x, 2**64)
            float(la.sum(ignores(x, 2)))


def test_a_call_with_parameters_only_records_its_body_op_by_op():
    """Nothing varies across such calls, so there is nothing to batch: the body runs as ops
    of the scope, and gives what it gives eagerly."""
    norm = la.cell(lambda M, scale: la.sum(M * M) * scale)
    eager = float(norm(U, 0.5))
    with la.batching() as scope:
        got = [norm(U, 0.5), norm(W_out, 2.0)]
    assert float(got[0]) == pytest.approx(eager, rel=1e-5)
    assert float(got[1]) == pytest.approx(float(np.sum(W_out.asnumpy() ** 2) * 2.0), rel=1e-5)
    assert "cell" not in scope.explain()


@pytest.mark.parametrize("body", [
    lambda x, k: x * 2.0 if k > 0 else x,              # a comparison
    lambda x, k: x * 2.0 if k else x,                  # truth
    lambda x, k: x * [1.0, 2.0][k],                    # a Python index
    lambda x, k: x * len(range(k)),                    # an int
    lambda x, k: la.take(x, k + 1),                    # arithmetic
])
def test_python_code_on_an_integer_argument_is_rejected(body):
    """One trace serves every call, so such code would run for one made-up value of k (it used
    to see 0, and every call got the branch or item of k = 0)."""
    with pytest.raises(la.CellError, match="argument 'k' of a cell is a per-call index"):
        with la.batching():
            la.cell(body)(f32(2), 1)


def test_calls_alternating_bundles_and_parameters_equal_eager():
    """The recorder memoises its two latest patterns: calls that alternate them (a tree's two
    node types), and a third one now and then, must each get their own trace."""
    bundles = [_Bundle(la.parameter(f32(H, H))) for _ in range(3)]
    mats = [la.parameter(f32(H, H)) for _ in range(2)]
    step = la.cell(lambda p, x, M: la.tanh(p.W @ x) + M @ x)
    order = [0, 1, 0, 1, 2, 1, 0, 0, 2, 2, 1]
    xs = [f32(H) for _ in order]
    eager = [step(bundles[k], la.array(x), mats[k % 2]).asnumpy() for k, x in zip(order, xs)]
    with la.batching():     # futures, bundles and parameters: the generated recorder's pattern
        got = [step(bundles[k], la.array(x), mats[k % 2]) for k, x in zip(order, xs)]
    assert type(step).__call__ is not la.Cell.__call__
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-5, atol=1e-6)


class _Bundle:
    def __init__(self, W):
        self.W = W


def test_value_dependent_control_flow_in_a_body_is_rejected():
    @la.cell
    def branchy(x):
        return la.tanh(x) if float(la.sum(x)) > 0 else x

    with pytest.raises(la.CellError, match="control flow"):
        with la.batching():
            branchy(f32(3))


def test_arrays_a_body_makes_or_reads_are_constants_of_the_trace():
    """np.zeros(H) in a body works as eagerly; a numpy array read from outside is read once, when
    the body is traced (as under jax.jit); a future of the scope read from outside is refused."""
    mask = np.array([1.0, 0.0, 2.0], np.float32)

    @la.cell
    def masked(W, x):
        h = la.tanh(W @ x + np.zeros(3, np.float32) + la.array(np.full(3, 0.5, np.float32)))
        return la.concatenate([h * mask, np.ones(2, np.float32)])

    W = la.parameter(np.eye(3, dtype=np.float32) * 0.5)
    xs = [f32(3) for _ in range(4)]
    eager = [masked(W, la.array(x)).asnumpy() for x in xs]
    eager_grad = _grad_of(W, lambda: la.sum(la.stack([masked(W, la.array(x)) for x in xs]) ** 2))
    with la.batching() as scope:
        outs = [masked(W, la.array(x)) for x in xs]
        la.sum(la.stack(outs) ** 2).backward()
    for o, e in zip(outs, eager):
        np.testing.assert_allclose(o.asnumpy(), e, rtol=1e-6)
    np.testing.assert_allclose(W.grad, eager_grad, rtol=1e-5)
    assert scope.stats.nodes < 4 * 3
    mask[...] = 5.0                 # after the trace: not seen (pass arrays that change as arguments)
    with la.batching():
        again = masked(W, la.array(xs[0]))
    np.testing.assert_allclose(again.asnumpy(), eager[0], rtol=1e-6)

    with la.batching():
        outer = la.tanh(f32(3))

        @la.cell
        def uses_outer(x):
            return x + outer

        with pytest.raises(la.CellError, match="neither an argument nor a parameter"):
            uses_outer(f32(3))


def test_computations_on_constants_alone_in_a_body_are_constants_too():
    """la.ones(3) * 2 in a body: computed once at the trace (its operands cannot change);
    W.T * 2.0 of a parameter is still refused (training updates W in place)."""
    @la.cell
    def scaled(W, x):
        return la.tanh(W @ x) * (la.ones(3, np.float32) * 2 + np.arange(3, dtype=np.float32)) + la.zeros(3)

    W = la.parameter(np.eye(3, dtype=np.float32) * 0.3)
    xs = [f32(3) for _ in range(3)]
    eager = [scaled(W, la.array(x)).asnumpy() for x in xs]
    with la.batching():
        outs = [scaled(W, la.array(x)) for x in xs]
    for o, e in zip(outs, eager):
        np.testing.assert_allclose(o.asnumpy(), e, rtol=1e-6)
    with pytest.raises(la.CellError, match="la.multiply of parameters and constants only"), la.batching():
        la.cell(lambda W, x: la.tanh((W.T * 2.0) @ x))(W, la.array(xs[0]))


def _grad_of(p, loss):
    p.grad = None
    loss().backward()
    g, p.grad = np.array(p.grad), None
    return g


def test_bad_cell_results_and_arguments():
    with pytest.raises(la.CellError, match="must return LazyArrays"):
        with la.batching():
            la.cell(lambda x: 3.0)(f32(2))
    with pytest.raises(la.CellError, match="argument 'k' of a cell is a per-call index"):
        with la.batching():
            la.cell(lambda x, k: x * k)(f32(2), 3)
    with pytest.raises(IndexError, match="out of range"):
        with la.batching():
            leaf(42)
    with pytest.raises(la.ShapeError, match="matmul"):
        with la.batching():
            internal(f32(3), f32(3), f32(3), f32(3))


def test_a_cell_may_return_lists_dicts_named_tuples_or_none_as_eagerly():
    """A body returning a list, a dict or None worked eagerly and raised CellError in a scope."""
    @la.cell
    def structured(x):
        h = la.tanh(E[2] * x)
        return {"h": h, "more": [x * 2, Pair(h + 1, x - 1)]}

    @la.cell
    def nothing(x):
        la.tanh(x)

    xs = [f32(H) for _ in range(3)]
    eager = [structured(la.array(x)) for x in xs]
    with la.batching():
        got = [structured(x) for x in xs]
        assert nothing(xs[0]) is None
    assert nothing(xs[0]) is None
    for g, e in zip(got, eager):
        assert set(g) == {"h", "more"} and isinstance(g["more"], list) and isinstance(g["more"][1], Pair)
        for a, b in [(g["h"], e["h"]), (g["more"][0], e["more"][0]), (g["more"][1].right, e["more"][1].right)]:
            np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)


def test_a_cell_may_return_a_parameter_as_it_is():
    """A body returning a parameter unchanged (alone, beside computed values, or nested) worked
    eagerly and raised CellError in a scope; every call now gives the parameter itself, and a
    loss through it reaches the parameter's gradient as eagerly."""
    @la.cell
    def with_weight(x):
        return la.tanh(E[1] * x), W_out

    @la.cell
    def weight_only(x):
        return W_out

    @la.cell
    def nested(x):
        return {"h": x * 2, "w": [W_out, U]}

    xs = [f32(H) for _ in range(3)]

    def loss(xs):
        total = 0.0
        for x in xs:
            h, w = with_weight(la.array(x))
            total = total + la.sum(w @ h) + la.sum(weight_only(la.array(x)) * 0.5) + la.sum(nested(la.array(x))["w"][0])
        return total

    eager = [_grad_of(p, lambda: loss(xs)) for p in (E, W_out)]
    with la.batching():
        calls = [with_weight(x) for x in xs] + [(nested(x)["h"], nested(x)["w"][1]) for x in xs]
        assert all(w is W_out for _, w in calls[:3]) and all(w is U for _, w in calls[3:])
        assert weight_only(xs[0]) is W_out
        values = [h.asnumpy() for h, _ in calls]
    np.testing.assert_allclose(values[0], np.tanh(E.asnumpy()[1] * xs[0]), rtol=1e-6)
    np.testing.assert_allclose(values[3], xs[0] * 2, rtol=1e-6)

    E.grad = W_out.grad = None
    with la.batching():
        loss(xs).backward()
    for p, want in zip((E, W_out), eager):
        np.testing.assert_allclose(p.grad, want, rtol=1e-5)
        p.grad = None


def test_cells_run_eagerly_outside_a_scope():
    h, c = internal(f32(H), f32(H), f32(H), f32(H))
    assert isinstance(h, la.LazyArray) and h.shape == (H,)


# -- random cell bodies over random trees -----------------------------------------------------

UNARY = ["tanh", "sigmoid", "relu", "negative"]
BINARY = ["add", "multiply", "subtract", "maximum"]
WIDTHS = (4, 3)     # one cell at two input shapes: each tree is encoded at one of them
# the scalar argument: a constant of the signature (Python or numpy, real, bool or complex), or
# per-call data: a 0-d numpy array, a tuple or list of numbers (one array, summed by the body)
SCALARS = (0.5, -1.0, True, np.float32(2.0), np.float64(-0.5), np.float16(0.5), np.True_, 0.5 + 1j,
           np.complex64(1j), np.array(0.5, np.float32), -0.0, (0.5, -0.25), [1.0, np.float32(0.5)])
INTS = (int, np.int64, np.int32, np.intp, np.uint8)
# (left, right, s, w) as they are, ((left, right), s, w) as a tuple, list or named tuple,
# ((left, (right, s)), w), or (left, right, s, w, W) with the body's weight W (a parameter, or a
# view of one) as an argument
CALLS = ("flat", "tuple", "list", "named", "nested", "param")
JOIN_CONSTS = (0.5, -1.0, 2, True, np.float32(0.5), np.float64(-0.25), np.int64(3), np.float16(1.5), np.True_, -0.0)


def examples(n):
    """``n``, or under the campaign profile (LAZYARRAY_CAMPAIGN, tests/conftest.py) its count."""
    return settings.default.max_examples if os.environ.get("LAZYARRAY_CAMPAIGN") else n


# the campaign draws a body's split into hundreds of parts four times as often as the default suite
COSTLY = 1 if os.environ.get("LAZYARRAY_CAMPAIGN") else 4


def rarely(draw, one_in):
    """True in about one draw in ``one_in`` (an inner value: hypothesis favours the bounds)."""
    return draw(st.integers(0, one_in - 1)) == one_in // 2
VIEWS = ("plain", "T", "slice")


class Pair(NamedTuple):
    left: object
    right: object


@st.composite
def bodies(draw):
    """A random DAG over the two child states: (op, operand indices) instructions; "scalar"
    uses the call's scalar argument, "index" its integer argument (a word, a position);
    "join0" stacks 0-d values with the scalar argument and constants (r10: a scalar among a
    stack's items); "parts" splits a join of many copies into many parts (r04)."""
    code = []
    n = 2
    if draw(st.booleans()):  # a join of both arguments, as TreeLSTM's [h_l; h_r]
        code.append(("join", draw(st.sampled_from(["concatenate", "stack"])), *draw(st.permutations([0, 1]))))
        n += 1
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["unary", "binary", "affine", "const", "join", "scalar", "index", "join0",
                                     "parts"]))
        if kind == "join":  # of the two arguments, often: gathered straight into the join
            code.append(("join", draw(st.sampled_from(["concatenate", "stack"])), draw(st.integers(0, min(n, 3) - 1)),
                         draw(st.integers(0, min(n, 3) - 1))))
        elif kind == "unary":
            code.append(("unary", draw(st.sampled_from(UNARY)), draw(st.integers(0, n - 1))))
        elif kind == "binary":
            code.append(("binary", draw(st.sampled_from(BINARY)), draw(st.integers(0, n - 1)),
                         draw(st.integers(0, n - 1))))
        elif kind == "affine":
            code.append(("affine", draw(st.integers(0, n - 1))))
        elif kind == "scalar":
            code.append(("scalar", draw(st.integers(0, n - 1)), draw(st.booleans())))
        elif kind == "index":
            code.append(("index", draw(st.sampled_from(["embed", "pick", "item"])), draw(st.integers(0, n - 1)),
                         draw(st.integers(0, n - 1))))
        elif kind == "join0":   # softmax(stack([sum(x), s, 0.5, ...]))[k] * y
            items = [draw(st.sampled_from([("sum", draw(st.integers(0, n - 1))), ("s",),
                                           ("const", draw(st.sampled_from(JOIN_CONSTS)))]))
                     for _ in range(draw(st.integers(1, 4)))]
            items = draw(st.permutations(items + [("sum", draw(st.integers(0, n - 1)))]))
            code.append(("join0", items, draw(st.integers(0, len(items) - 1)), draw(st.integers(0, n - 1))))
        elif kind == "parts":   # split([x, y] * r) into 2r vectors or 2rd numbers, a few hundred at times
            r = draw(st.integers(5, 100) if rarely(draw, 10 * COSTLY) else st.integers(1, 3))
            code.append(("parts", draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)), r,
                         draw(st.sampled_from(["vectors", "units"])), draw(st.integers(0, 2 * r - 1)),
                         draw(st.integers(0, 2 * r - 1))))
        else:               # fixed constants, or any float32 value: a trace of its own
            c = draw(st.sampled_from([0.5, -1.0, 2, np.float32(0.5)]) | st.floats(-4, 4, width=32))
            code.append(("const", c, draw(st.integers(0, n - 1))))
        n += 1
    return code


@st.composite
def random_trees(draw, depth=3):
    """A word w >= 0 is a leaf computed in the scope, ~w one given as a numpy array."""
    if depth == 0 or draw(st.booleans()):
        return draw(st.integers(-9, 8))
    return (draw(random_trees(depth - 1)), draw(random_trees(depth - 1)))


@st.composite
def cell_calls(draw, scalars=SCALARS):
    """How each call passes its arguments: (convention, module, scalar, integer argument, view of
    W for the "param" convention, which of the cells), used in turn."""
    def call():
        k = draw(st.integers(-3, 2))    # in range for E (9 rows) and for vectors of every width
        w = draw(st.sampled_from([c for c in INTS if k >= 0 or c is not np.uint8]))(k)
        return (draw(st.sampled_from(CALLS)), draw(st.integers(0, 1)), draw(st.sampled_from(scalars)), w,
                draw(st.sampled_from(VIEWS)), draw(st.integers(0, 2)))
    return [call() for _ in range(draw(st.integers(1, 5)))]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(bodies(), min_size=1, max_size=2),
       st.lists(st.tuples(random_trees(), st.sampled_from(WIDTHS)), min_size=1, max_size=5),
       st.sampled_from(["depth", "agenda"]), st.sampled_from([None, 16]), st.booleans(), cell_calls(),
       st.booleans(), st.booleans())
def test_random_cell_bodies_over_random_trees_equal_eager(codes, trees, scheduler, block_bytes, force, calls,
                                                          method, memplan):
    """One or two cells of random bodies (a call picks one); ``block_bytes`` 16: elementwise
    runs of the body in blocks of 8 calls (lazyarray.blocks); ``force``: the first tree's value
    is forced before the others are recorded (two flushes); ``method``: the cells are
    ``__call__`` and ``other`` of two module objects holding their own weights (the first body
    and the last); ``memplan``: with a memory plan."""
    blocks = importlib.import_module("lazyarray.blocks")
    default = blocks.BLOCK_BYTES
    blocks.BLOCK_BYTES = block_bytes or default
    try:
        _random_cell_bodies(codes, trees, scheduler, force, calls, method, memplan)
    finally:
        blocks.BLOCK_BYTES = default


def _random_cell_bodies(codes, trees, scheduler, force=False, calls=(("flat", 0, 0.5, 0, "plain", 0),), method=False,
                        memplan=False, grad=False):
    """``grad``: the backward of a weighted sum of the trees' results too (after ``force``'s
    flush, if any: the first tree's bodies are computed again), every parameter's gradient
    equal to the eager one; numpy leaves are then not refilled after their call (an eager
    backward would read them refilled: test_backward.py::test_eager_backward_reads_operands_as_called)."""
    values = np.random.default_rng(0)  # not the module's generator: the tests after this one must
    # draw the same values in every run, whatever hypothesis drew here

    def f32(*shape):
        return values.standard_normal(shape).astype(np.float32)

    def weights():      # per width: the leaves' table, W, W2
        return {d: (la.parameter(f32(9, d)), la.parameter(f32(d, d)), la.parameter(f32(d, 2 * d))) for d in WIDTHS}

    tables = {d: f32(9, d) for d in WIDTHS}    # the numpy leaves' table

    def unpack(args):
        """The body's arguments however the call passed them (see CALLS)."""
        if len(args) >= 4:
            return args
        if len(args) == 3:
            pair, s, w = args
            left, right = (pair.left, pair.right) if isinstance(pair, Pair) else pair
            return left, right, s, w
        (left, (right, s)), w = args
        return left, right, s, w

    def body(Ws, code, *args):
        left, right, s, w, *given = unpack(args)
        E, W, W2 = Ws[left.shape[0]]
        W = given[0] if given else W
        if isinstance(s, (tuple, list)) or getattr(s, "ndim", 0) == 1:
            s = la.sum(s)       # numbers: one per-call array in a scope
        vals = [left, right]
        for ins in code:
            if ins[0] == "unary":
                v = getattr(la, ins[1])(vals[ins[2]])
            elif ins[0] == "binary":
                v = getattr(la, ins[1])(vals[ins[2]], vals[ins[3]])
            elif ins[0] == "affine":
                v = la.tanh(W @ vals[ins[1]])
            elif ins[0] == "join" and ins[1] == "concatenate":
                v = la.tanh(W2 @ la.concatenate([vals[ins[2]], vals[ins[3]]]))
            elif ins[0] == "join":
                v = la.sum(la.stack([vals[ins[2]], vals[ins[3]]]), axis=0)
            elif ins[0] == "scalar":
                x = vals[ins[1]]
                v = s * x if ins[2] else x * s
                if np.dtype(getattr(s, "dtype", type(s))).kind == "c":
                    v = la.abs(v)
            elif ins[0] == "index" and ins[1] == "embed":
                v = vals[ins[2]] + E[w]
            elif ins[0] == "index":
                x = vals[ins[3]]
                v = vals[ins[2]] * (la.pick(x, w) if ins[1] == "pick" else x[w])
            elif ins[0] == "join0":
                _, items, k, j = ins
                joined = la.stack([la.sum(vals[it[1]]) if it[0] == "sum" else s if it[0] == "s" else it[1]
                                   for it in items])
                if joined.dtype.kind == "c":
                    joined = la.abs(joined)
                v = vals[j] * la.softmax(joined)[k]
            elif ins[0] == "parts":
                _, a, b, r, unit, p, q = ins
                d = vals[a].shape[0]
                parts = la.split(la.concatenate([vals[a], vals[b]] * r), 2 * r * (d if unit == "units" else 1))
                if unit == "units":     # numbers p*d ... p*d + d - 1 reversed, plus the mean of all
                    v = la.concatenate(parts[p * d:(p + 1) * d][::-1]) + la.mean(la.concatenate(parts[::-1]))
                else:
                    v = parts[p] * parts[q] + la.mean(la.stack(parts), axis=0)
            else:
                v = vals[ins[2]] * ins[1]
            vals.append(v)
        return vals[-1], vals[len(vals) // 2]  # the second may be an argument or an intermediate

    if method:      # two method cells: the first body and the last
        class Module:
            def __init__(self):
                self.Ws = weights()

            @la.cell
            def __call__(self, *args):
                return body(self.Ws, codes[0], *args)

            @la.cell
            def other(self, *args):
                return body(self.Ws, codes[-1], *args)

        modules = [Module(), Module()]
        Ws = modules[0].Ws
    else:
        Ws = weights()

        def make(code):
            return la.cell(lambda *args: body(Ws, code, *args))

        cells = [make(code) for code in codes]

    def run(tree, d, turn):
        if isinstance(tree, int):
            if tree < 0:    # a fresh numpy array: refilled after its call (the call copied it)
                return np.tanh(tables[d][~tree])
            return la.tanh(Ws[d][0][tree])
        left, right = run(tree[0], d, turn), run(tree[1], d, turn)
        convention, m, s, w, view, c = calls[next(turn) % len(calls)]
        cell = (modules[m] if c % 2 == 0 else modules[m].other) if method else cells[c % len(cells)]
        if convention == "flat":
            out, mid = cell(left, right, s, w)
        elif convention == "param":     # W, W.T (computes W.T @ x) or W[0:d] as an argument
            W = (modules[m].Ws if method else Ws)[d][1]
            out, mid = cell(left, right, s, w, W if view == "plain" else W.T if view == "T" else W[0:d])
        elif convention == "nested":
            out, mid = cell((left, (right, s)), w)
        else:
            out, mid = cell({"tuple": tuple, "list": list, "named": Pair._make}[convention]((left, right)), s, w)
        result = out - mid * 0.5
        for a in (left, right):
            if isinstance(a, np.ndarray) and not grad:
                a[...] = np.nan
        return result

    def encode(forest):
        turn = itertools.count()
        return [run(t, d, turn) for t, d in forest]

    params = [p for ws in ([m.Ws for m in modules] if method else [Ws]) for triple in ws.values() for p in triple]
    weights_of = [values.standard_normal(d).astype(np.float32) for _, d in trees] if grad else None

    def backward(results):
        _total(results, weights_of).backward()
        grads = [None if p.grad is None else np.array(p.grad) for p in params]
        for p in params:
            p.grad = None
        return grads

    if scheduler == "learned":      # a policy learned (in a few episodes) on what the scope records
        scheduler = la.learn_policy(lambda forest: _total(encode(forest), weights_of), [trees], episodes=20,
                                    refine_nodes=0)
    relabelled = [(_relabel(t), d) for t, d in trees]  # same structure: the second scope replays the first
    generations = []    # each scope's signature table: the replay hits unless it is new (past its bounds)
    for forest, replay in ((trees, False), (relabelled, True)):
        if replay:      # weights updated in place between scopes: the replay reads the new ones
            for module_weights in ([m.Ws for m in modules] if method else [Ws]):
                for weights_of_width in module_weights.values():
                    for p in weights_of_width:
                        p.asnumpy()[...] = f32(*p.shape)
        eager = encode(forest)
        check_grads = grad and _total(eager, weights_of).requires_grad  # some tree reads a parameter
        eager_grads = backward(eager) if check_grads else None
        eager = [la.asnumpy(v) for v in eager]
        with la.batching(scheduler=scheduler, memplan=memplan) as scope:
            generations.append(scope.table.generation)
            turn = itertools.count()
            got = []
            for t, d in forest:
                got.append(run(t, d, turn))
                if force and len(got) == 1:
                    float(la.sum(got[0]))
            if check_grads:
                _total(got, weights_of).backward()
        if check_grads:
            for k, (p, e) in enumerate(zip(params, eager_grads)):
                g = p.grad
                p.grad = None
                if g is None or e is None:      # a scope may give zeros where eagerly none arrived
                    assert not np.any(g) and not np.any(e), k
                else:
                    np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(e).max())),
                                               err_msg=f"parameter {k}")
        for g, e in zip(got, eager):
            # float32 products summed in another order (BLAS picks kernels by layout and batch
            # size) differ by a few ulps of values up to ~5, and ``out - mid * 0.5`` can cancel
            # to a small result: an absolute tolerance of that size, never a loose relative one
            assert g.shape == e.shape and g.dtype == e.dtype
            np.testing.assert_allclose(la.asnumpy(g), e, rtol=1e-4, atol=1e-5)
        assert scope.stats.batches >= scope.stats.lower_bound
        assert scope.stats.cache_misses == 0 or not replay or generations[-1] != generations[-2]  # every flush replays


def _total(results, weights):
    """A random weighted sum of the results: the loss of a gradient test."""
    return la.sum(la.stack([la.sum(r * w) for r, w in zip(results, weights)]))


REAL_SCALARS = tuple(s for s in SCALARS if not np.iscomplexobj(s))


@settings(max_examples=int(os.environ.get("LAZYARRAY_GRAD_EXAMPLES", examples(200))), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(bodies(), min_size=1, max_size=2),
       st.lists(st.tuples(random_trees(), st.sampled_from(WIDTHS)), min_size=1, max_size=5),
       st.sampled_from(["depth", "agenda", "sufficient", "fsm", "learned"]), st.sampled_from([None, 16]), st.booleans(),
       cell_calls(REAL_SCALARS), st.booleans(), st.booleans())
def test_random_cell_bodies_gradients_equal_eager(codes, trees, scheduler, block_bytes, force, calls, method, memplan):
    """The random bodies of the test above, then a backward: every parameter (tables read by
    rows, weights shared by calls, weights and views of them passed as arguments, two modules'
    own) gets the eager gradient, the first time and from the plan cache, under every
    scheduler and a policy learned on the trees. Left out, each a bug that test_backward.py
    shows: complex scalars (gradients through complex values are dropped in a scope), plans
    replayed at another position than they were compiled at (hence the empty plan cache)."""
    PLANS.clear()
    blocks = importlib.import_module("lazyarray.blocks")
    default = blocks.BLOCK_BYTES
    blocks.BLOCK_BYTES = block_bytes or default
    try:
        _random_cell_bodies(codes, trees, scheduler, force, calls, method, memplan, grad=True)
    finally:
        blocks.BLOCK_BYTES = default


def _relabel(tree):
    if isinstance(tree, int):
        return (tree * 5 + 3) % 9 if tree >= 0 else ~((~tree * 5 + 3) % 9)
    return (_relabel(tree[0]), _relabel(tree[1]))


# -- plan cache ---------------------------------------------------------------------------------

def test_plan_cache_hits_on_same_structure_and_stays_correct():
    from lazyarray.plancache import PLANS
    PLANS.clear()
    first = [((1, 2), 3), (4, 5)]
    relabelled = [((7, 8), 0), (1, 6)]       # same shapes, other words: same structure
    other = [(1, (2, 3))]
    scopes = []
    for trees in (first, relabelled, other, first):
        with la.batching() as scope:
            got = [tree_loss(t) for t in trees]
        np.testing.assert_allclose([float(g) for g in got], [float(tree_loss(t)) for t in trees], rtol=1e-4)
        scopes.append(scope.stats)
    assert [(s.cache_hits, s.cache_misses) for s in scopes] == [(0, 1), (1, 0), (0, 1), (1, 0)]


def test_plan_cache_is_bounded():
    from lazyarray.plancache import PlanCache

    class View:
        def __init__(self, n):
            self.sig = self.refs = np.arange(n)

    cache = PlanCache(max_entries=3, max_bytes=1 << 20)
    for n in range(1, 6):
        cache.put(cache.key("agenda", View(n)), [n])
    assert len(cache) == 3 and cache.get(cache.key("agenda", View(1))) is None
    assert cache.get(cache.key("agenda", View(5))) == [5]
    cache.put(cache.key("agenda", View(1 << 17)), ["too big"])  # over max_bytes: not kept
    assert cache.get(cache.key("agenda", View(1 << 17))) is None


def test_non_array_arguments_are_static():
    class Model:  # hashed by identity, like a bundle of parameters
        def __init__(self):
            self.W = la.parameter(f32(H, H))

    def step(model, x):
        return la.tanh(model.W @ x)

    cell = la.cell(step)
    first, second = Model(), Model()
    xs = [f32(H) for _ in range(3)]
    with la.batching() as scope:
        got = [cell(m, x) for m in (first, second) for x in xs]
    want = [step(m, la.array(x)).asnumpy() for m in (first, second) for x in xs]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-4, atol=1e-6)
    assert scope.stats.batches == 3  # inputs, then one batch per model
    with pytest.raises(la.CellError, match="neither an array nor hashable"):
        with la.batching():
            cell({"W": first.W}, xs[0])


def test_generated_recorder_and_generic_path_record_the_same_nodes():
    class Bundle:
        scale = 2.0

    @la.cell
    def step(p, h, word):
        return la.tanh(E[word] * p.scale + h)

    h0, bundle = f32(H), Bundle()
    calls = [(bundle, 3), (bundle, np.int64(4)), (bundle, 5)]
    eager = [step(p, la.tanh(h0), w).asnumpy() for p, w in calls]
    with la.batching() as scope:
        h = la.tanh(h0)
        got = [step(p, h, w) for p, w in calls]             # future/static/int: the generated path
        raw = step(calls[0][0], np.tanh(h0), 3)              # a numpy array: the generic path
    assert step.fast
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-6)
    np.testing.assert_allclose(raw.asnumpy(), eager[0], rtol=1e-6)
    (line,) = [line for line in scope.explain().splitlines() if "cell" in line]
    assert line.split()[1] == "4"  # the four calls share one signature, whichever path recorded them


def test_a_cell_called_with_several_argument_counts_and_outside_scopes():
    """The first argument count gets the cell's own __call__; the others, eager calls and
    calls that fail its guards take the general path, with the same results."""
    @la.cell
    def mix(*xs):
        return la.tanh(la.sum(la.stack(list(xs)), axis=0))

    xs = [f32(H) for _ in range(3)]
    hs = np.tanh(xs)
    for _ in range(2):  # the second scope starts with every argument count specialised
        with la.batching():
            futures = [la.tanh(x) for x in xs]
            got = {k: [mix(*futures[:k]) for _ in range(2)] for k in (2, 1, 3)}
            stacked = mix(la.stack(futures[:2]), la.stack(futures[1:]))  # other classes: guards fail
        assert isinstance(mix, la.Cell) and set(mix.fast) == {1, 2, 3}
        for k, outs in got.items():
            for g in outs:
                np.testing.assert_allclose(g.asnumpy(), np.tanh(hs[:k].sum(axis=0)), rtol=1e-5)
        np.testing.assert_allclose(stacked.asnumpy(), np.tanh(hs[:2] + hs[1:]), rtol=1e-5)
    eager = mix(*[la.array(x) for x in xs[:2]])            # outside a scope, after specialising
    np.testing.assert_allclose(eager.asnumpy(), np.tanh(np.sum(xs[:2], axis=0)), rtol=1e-5)


@pytest.fixture
def fresh_signatures():
    """A new signature table: the generated-recorder tests count calls that take the generic path
    over two scopes, and a table replaced as the second begins (past its bound of parameters
    gone, which the random tests before them approach) sends them there once more."""
    importlib.import_module("lazyarray.scope").SIGNATURES.reset()


@pytest.mark.usefixtures("fresh_signatures")
def test_each_argument_pattern_gets_a_generated_recorder(monkeypatch):
    """A cell used on inputs of several sizes (the layers of a stacked LSTM) records every call
    through a generated recorder, up to `PATTERNS` per argument count; the rest take the
    generic path. Same values either way."""
    from lazyarray.scope import Scope

    @la.cell
    def step(W, x, h):
        return la.tanh(W @ la.concatenate([x, h]))

    sizes = [1, 2, 3, 5, 6, 7]                      # input sizes: more than PATTERNS of them
    Ws = {d: la.parameter(f32(H, d + H)) for d in sizes}
    xs = {d: f32(d) for d in sizes}
    h0 = f32(H)
    want = {d: np.tanh(Ws[d].asnumpy() @ np.concatenate([xs[d], np.tanh(h0)])) for d in sizes}
    generic = []
    record_cell = Scope.record_cell
    monkeypatch.setattr(Scope, "record_cell", lambda self, *a: generic.append(a[1][1].shape) or record_cell(self, *a))
    for scope in range(2):
        generic.clear()
        with la.batching():
            h = la.tanh(h0)
            got = [(d, step(Ws[d], la.array(xs[d]), h)) for _ in range(2) for d in sizes]
        for d, g in got:
            np.testing.assert_allclose(g.asnumpy(), want[d], rtol=1e-5, atol=1e-6)
    assert len(step.fast[3]) == importlib.import_module("lazyarray.cell").PATTERNS == 4
    assert sorted(set(generic)) == [(6,), (7,)]     # only the patterns past the fourth


@pytest.mark.usefixtures("fresh_signatures")
def test_numpy_arguments_take_the_generated_recorder_and_are_copied(monkeypatch):
    """Per-call numpy data (a refilled buffer here) records an input node per call through the
    generated recorder, as of the call; other shapes and dtypes get recorders of their own."""
    from lazyarray.scope import Scope

    W = la.parameter(f32(H, H))

    @la.cell
    def step(x, h):
        return la.tanh(W @ x + h)

    rng = np.random.default_rng(1)
    rows = [rng.standard_normal(H).astype(np.float32) for _ in range(4)]
    wide = rng.standard_normal(H).astype(np.float64)
    generic = []
    record_cell = Scope.record_cell
    monkeypatch.setattr(Scope, "record_cell", lambda self, *a: generic.append(a) or record_cell(self, *a))
    h0 = f32(H)
    for scope in range(2):
        generic.clear()
        buf = np.empty(H, np.float32)
        with la.batching():
            h = la.tanh(h0)
            got = []
            for row in rows:
                buf[:] = row
                got.append(step(buf, h))
            got.append(step(wide, h))
        want = [np.tanh(W.asnumpy() @ x + np.tanh(h0)) for x in rows + [wide]]
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-5)
    assert generic == []


@pytest.mark.usefixtures("fresh_signatures")
def test_numpy_integer_arguments_take_the_generated_recorder(monkeypatch):
    """Word ids read from a numpy array are numpy integers: recorded as ints, without the
    generic path once the signature is known; out of range is still an IndexError."""
    from lazyarray.scope import Scope

    @la.cell
    def embed(w, h):
        return la.tanh(E[w] + h)

    generic = []
    record_cell = Scope.record_cell
    monkeypatch.setattr(Scope, "record_cell", lambda self, *a: generic.append(a) or record_cell(self, *a))
    ids = np.array([3, 0, 8, 3], np.int32)
    h0 = f32(H)
    with la.batching():
        h = la.tanh(h0)
        got = [embed(3, h)] + [embed(w, h) for w in ids]
        assert len(generic) == 1             # the first call, with a Python int, traced the body
        with pytest.raises(IndexError):
            embed(np.int64(9), h)
    for g, w in zip(got, [3, *ids]):
        np.testing.assert_allclose(g.asnumpy(), np.tanh(E.asnumpy()[w] + np.tanh(h0)), rtol=1e-6)


def test_a_method_can_be_a_cell():
    """The instance (a module holding its parameters) is a static argument, keyed by identity:
    two instances trace apart and each call sees its own weights."""
    class Layer:
        def __init__(self):
            self.W = la.parameter(f32(H, H))

        @la.cell
        def __call__(self, x):
            return la.tanh(self.W @ x)

    layers, xs = [Layer(), Layer()], [f32(H) for _ in range(3)]
    with la.batching() as scope:
        got = [layer(la.array(x)) for x in xs for layer in layers]
    want = [np.tanh(layer.W.asnumpy() @ x) for x in xs for layer in layers]
    for g, w in zip(got, want):     # float32 products summed in another order: outputs near 0 differ
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-5, atol=1e-6)
    assert scope.stats.batches == 3     # the inputs, and one batch of calls per layer
    assert isinstance(Layer.__call__, la.Cell)


def test_static_objects_and_parameters_switch_the_generated_recorder_correctly():
    class Bundle:
        def __init__(self):
            self.scale = la.parameter(f32(H), name="scale")

    first, second = Bundle(), Bundle()
    V, W = la.parameter(f32(H, H), name="V"), la.parameter(f32(H, H), name="W")

    @la.cell
    def step(p, M, h, word):
        return la.tanh(M @ h * p.scale + E[word])

    h0 = f32(H)
    calls = [(first, V, 1), (first, V, 2), (first, W, 3), (second, W, 4), (second, V, 5), (first, V, 6)]
    eager = [step(p, M, la.array(h0), w).asnumpy() for p, M, w in calls]
    with la.batching():
        h = la.array(h0) + 0.0
        got = [step(p, M, h, w) for p, M, w in calls]
    assert step.fast
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-5)


@la.cell
def _chain_with_a_view(x):
    """Elementwise temporaries that must not be overwritten in place: ``t`` is also read through
    a view used after its last elementwise reader, ``e`` by two elementwise steps, ``r`` is
    returned. (Each op has its own signature, so each is a step of its own.)"""
    t = la.tanh(x)
    v = la.reshape(t, (2, H // 2))
    d = la.sqrt(la.abs(x) + 1.0)
    w = la.reshape(v, (H,)) - la.square(d)
    e = la.exp(x)
    r = la.relu(x)
    return la.stack([e * 2.0, e + d, t * d, w, la.maximum(r, 0.5)]), r


@pytest.mark.parametrize("calls", [1, 5])
def test_in_place_temporaries_and_direct_outputs_keep_every_value(calls):
    xs = [f32(H) for _ in range(calls)]
    eager = [[o.asnumpy() for o in _chain_with_a_view(la.array(x))] for x in xs]
    with la.batching():
        got = [_chain_with_a_view(la.array(x) + 0.0) for x in xs]
        twice = [_twice(g[1]) for g in got]
    for g, e, t in zip(got, eager, twice):
        for a, b_ in zip(g, e):
            np.testing.assert_allclose(a.asnumpy(), b_, rtol=1e-5)
        for out in t[:2]:
            np.testing.assert_allclose(out.asnumpy(), e[1], rtol=1e-5)
        np.testing.assert_allclose(t[2].asnumpy(), np.tanh(e[1]) * 2, rtol=1e-5)


@la.cell
def _twice(x):
    """An argument returned as it is, and one value returned twice."""
    y = la.tanh(x) * 2.0
    return x, x, y


W_join = la.parameter(f32(H, 2 * H), name="W_join")


@la.cell
def _joined(a, b, c):
    """Joins of arguments: ``[a; b]`` read nowhere else (gathered straight into the join), and
    returned as well as used; ``c`` is also read by the stack, so that one is not."""
    j = la.concatenate([a, b])
    s = la.stack([c, c * 2.0])
    return la.tanh(W_join @ j) + c, j, s


@pytest.mark.parametrize("memplan", [False, True])
def test_arguments_a_body_joins_are_gathered_straight_into_the_join(monkeypatch, memplan):
    def run(tree):
        if isinstance(tree, int):
            return la.tanh(E[tree])
        h, j, s = _joined(run(tree[0]), run(tree[1]), run(tree[0]) * 0.5)
        return h + la.sum(j) - la.sum(s, axis=0)

    eager = [run(t).asnumpy() for t in TREES]
    kernels = []
    for join in (True, False):  # the same scopes with the join done in the body
        if not join:
            monkeypatch.setattr(importlib.import_module("lazyarray.cell"), "_argument_join", lambda *a: None)
            importlib.import_module("lazyarray.scope").SIGNATURES.reset()  # trace the body again
        for _ in range(2):  # compiled, then replayed from the plan cache
            with la.batching(memplan=memplan) as scope:
                got = [run(t) for t in TREES]
            for g, e in zip(got, eager):
                np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-4, atol=1e-6)
        kernels.append(scope.stats.kernels)
    if memplan:  # the planned layout makes the arguments views: the join is the only copy either way
        assert kernels[0] == kernels[1]
    else:  # one gather for [a; b] instead of one per argument and the join
        assert kernels[0] < kernels[1]


@la.cell
def _side_by_side(a, b):
    """A join along a later axis: not rows of the result, so the body joins it itself."""
    return la.tanh(la.concatenate([a, b], axis=1))


def test_joins_along_a_later_axis_stay_in_the_body():
    xs = [f32(2, H) for _ in range(6)]
    eager = [_side_by_side(la.array(x), la.array(y)).asnumpy() for x, y in zip(xs, xs[::-1])]
    with la.batching():
        got = [_side_by_side(la.array(x) * 1.0, la.array(y) * 1.0) for x, y in zip(xs, xs[::-1])]
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-5)


def test_negative_zero_in_cells():
    x = np.array([1.0, 2.0], dtype=np.float32)

    @la.cell
    def f(a, s):
        return a / s

    s = 0.0

    @la.cell
    def g(a):
        return a / s

    with np.errstate(divide="ignore"):
        with la.batching():
            f(la.array(x), 0.0), g(la.array(x))
            r = f(la.array(x), -0.0)
        assert np.asarray(r).tolist() == [-np.inf, -np.inf]             # scalar argument
        s = -0.0
        with la.batching():
            r = g(la.array(x))
        assert np.asarray(r).tolist() == [-np.inf, -np.inf]             # rebound global


@pytest.mark.parametrize("scalar", [0.5, -0.0, 2, True, np.float32(0.5), np.float64(-1.5), np.True_, 1j],
                         ids=["float", "negzero", "int", "bool", "f32", "f64", "np_bool", "complex"])
@pytest.mark.parametrize("how", ["argument", "constant"])
def test_a_scalar_in_a_join_in_a_body_is_a_constant_of_the_trace(scalar, how):
    """``la.stack([la.sum(x), s])`` in a body, ``s`` a scalar argument or a number in the body
    (found by the random bodies' "join0"): a scalar item of a join became an input node, which a
    traced body refuses ("an array that is neither an argument nor a parameter"); eagerly and in
    a scope outside a cell it is an item like the others (r10)."""
    @la.cell
    def given(x, s):
        return x * la.abs(la.stack([la.sum(x), s, la.max(x)]))

    @la.cell
    def written(x):
        return x * la.abs(la.stack([la.sum(x), scalar, la.max(x)]))

    xs = [f32(3) for _ in range(3)]
    call = (lambda x: given(x, scalar)) if how == "argument" else written
    if how == "argument" and scalar.__class__ is int:   # a per-call index (test_python_code_on_an_integer...)
        with pytest.raises(la.CellError, match="per-call index"), la.batching():
            call(la.array(xs[0]))
        return
    eager = [call(la.array(x)).asnumpy() for x in xs]
    with la.batching() as scope:
        got = [call(la.array(x)) for x in xs]
    for g, e in zip(got, eager):
        assert g.dtype == e.dtype
        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-6)
    assert scope.stats.batches <= 3


def test_a_body_that_catches_a_cell_error_and_goes_on_is_refused():
    W = la.parameter(np.eye(3, dtype=np.float32) * 2)

    @la.cell
    def scaled(x):
        y = W @ x
        try:
            s = float(la.max(y))        # value-dependent: not part of a static cell
        except Exception:               # a defensive fallback: the trace took this path
            s = 1.0
        return y / s

    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_allclose(scaled(la.array(x)).asnumpy(), x / 3, rtol=1e-6)  # eager
    with pytest.raises(la.CellError, match="caught"):
        with la.batching():
            scaled(la.array(x))         # returned 2 * x (traced with s = 1.0), silently


def test_a_body_that_catches_the_refusal_of_reading_an_integer_argument_is_refused():
    E = la.parameter(np.arange(12, dtype=np.float32).reshape(4, 3))

    @la.cell
    def row(x, k):
        try:
            r = E[k] if k >= 0 else E[0]
        except Exception:
            r = E[0]
        return r + x

    x = np.zeros(3, np.float32)
    with pytest.raises(la.CellError, match="caught"):
        with la.batching():
            row(la.array(x), 2)         # returned E[0] for every call, silently


@pytest.mark.parametrize("body", [lambda W, x: la.tanh(W) @ x, lambda W, x: (W * 2) @ x,
                                  lambda W, x: la.concatenate([W, W], axis=1) @ la.concatenate([x, x])])
def test_a_body_computing_on_parameters_only_is_named_in_its_cell_error(body):
    W = la.parameter(np.eye(3, dtype=np.float32))
    c = la.cell(lambda x: body(W, x))
    with pytest.raises(la.CellError, match="parameters and\\s+constants only"):
        with la.batching():
            c(la.array(np.ones(3, np.float32)))


def test_a_shape_error_in_a_body_names_the_cell_and_leaves_it_usable():
    W = la.parameter(f32(H, H))

    @la.cell
    def step(x):
        return la.tanh(W @ x)

    with pytest.raises(la.ShapeError, match=r"cell .*step: matmul.*not aligned"):
        with la.batching():
            step(la.array(f32(H + 1)))
    x = f32(H)
    with la.batching():
        y = step(la.array(x))
    np.testing.assert_allclose(y.asnumpy(), np.tanh(W.asnumpy() @ x), rtol=1e-6)
