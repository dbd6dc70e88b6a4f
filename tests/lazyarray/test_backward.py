"""Backward bugs found by the gradient hunt (tests/ops_registry/test_vjps.py, the gradient tests
of test_random_programs.py and test_cell.py), each as its smallest repro: the gradient a scope
gives equals the eager one, which equals finite differences."""
import contextlib

import numpy as np
import pytest

import lazyarray as la
from lazyarray.plancache import PLANS

X = np.array([0.5, -1.0], np.float32)


def same(got, want):
    assert want is not None and got is not None
    np.testing.assert_allclose(got, want, rtol=1e-6)


def eager_and_batched(loss, *params):
    """(eager gradients, batched gradients) of ``loss()`` for ``params``, cleared after each."""
    out = []
    for scoped in (False, True):
        if scoped:
            with la.batching():
                loss().backward()
        else:
            loss().backward()
        out.append([None if p.grad is None else np.array(p.grad) for p in params])
        for p in params:
            p.grad = None
    return out


@pytest.mark.parametrize("view", ["T", "slice", "reshape"])
def test_views_of_parameters_pass_their_gradient_to_the_parameter_in_a_scope(view):
    """Found lost (a derived parameter had a gradient of its own), fixed in 111aa00."""
    W = la.parameter(np.arange(1.0, 5.0, dtype=np.float32).reshape(2, 2))
    make = {"T": lambda: W.T, "slice": lambda: W[1:], "reshape": lambda: W.reshape(4)[:2].reshape(1, 2)}[view]
    eager, batched = eager_and_batched(lambda: la.sum(la.tanh(make() @ la.array(X))), W)
    same(batched[0], eager[0])


def test_a_view_of_a_parameter_made_before_the_scope_passes_its_gradient():
    W = la.parameter(np.arange(1.0, 5.0, dtype=np.float32).reshape(2, 2))
    WT = W.T
    eager, batched = eager_and_batched(lambda: la.sum(la.tanh(WT @ la.array(X))), W)
    same(batched[0], eager[0])


def test_gradients_through_complex_values_in_a_scope():
    """|x * c + d| of a real parameter x: eagerly (tests/ops_registry/test_vjps.py checks it
    against finite differences) and in a scope."""
    x = la.parameter(np.array([1.0, 2.0], np.float32))
    eager, batched = eager_and_batched(lambda: la.sum(la.abs(la.array(X) * (0.3 - 0.8j) + x)), x)
    same(batched[0], eager[0])


def test_eager_backward_reads_operands_as_called():
    """A scope copies a numpy operand when recorded (README: refilling a buffer between calls
    gives each call the value it had); eagerly the gradient must use that value too."""
    p = la.parameter(np.ones(3, np.float32))
    buf = np.full(3, 2.0, np.float32)
    y = p * buf
    buf[...] = 5.0
    la.sum(y).backward()
    np.testing.assert_array_equal(p.grad, [2.0, 2.0, 2.0])


def test_an_outer_future_in_a_nested_scope_passes_its_gradient_or_refuses():
    W = la.parameter(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    la.sum(la.tanh(W @ X) * 2.0).backward()
    want = np.array(W.grad)
    W.grad = None
    try:
        with la.batching():
            h = la.tanh(W @ X)
            with la.batching():
                la.sum(h * 2.0).backward()
    except la.ScopeError:
        return
    same(W.grad, want)


def test_a_finished_scopes_future_in_a_later_scope_passes_its_gradient_or_refuses():
    W = la.parameter(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    with la.batching():
        h = la.tanh(W @ X)
    try:
        with la.batching():
            la.sum(h * 2.0).backward()
    except la.ScopeError:
        return
    assert W.grad is not None


def test_values_the_loss_does_not_reach_get_no_gradient():
    """README: p.grad is None for parameters the backward does not reach; inputs likewise."""
    with la.batching():
        a, b = la.array(X, grad=True), la.array(X, grad=True)
        la.sum(la.tanh(a)).backward()
    assert a.grad is not None and b.grad is None


def test_setting_the_gradient_of_an_input_inside_its_scope():
    with la.batching():
        x = la.array(X, grad=True)
        la.sum(x * 2.0).backward()
        x.grad = np.zeros(2, np.float32)
        np.testing.assert_array_equal(x.grad, [0.0, 0.0])


def test_a_flush_replayed_at_another_position_passes_gradients():
    def loss(x):
        return la.sum(la.tanh(x) * 2.0)

    x = la.array(X, grad=True)
    loss(x).backward()
    want = np.array(x.grad)
    PLANS.clear()
    with la.batching():          # compiles the flush of loss(x) as the scope's first
        loss(la.array(X, grad=True)).backward()
    with la.batching() as scope:
        int(la.sum(la.array(np.arange(3)) * 2))     # a first flush, of integers
        x = la.array(X, grad=True)
        loss(x).backward()                          # replays the plan above, after it
    assert scope.stats.cache_hits == 1
    same(x.grad, want)


def test_parameters_the_loss_does_not_reach_get_no_gradient():
    """W1's node shares its gradient base with W2's (same class): it got zeros, eagerly None."""
    W1 = la.parameter(np.eye(2, dtype=np.float32))
    W2 = la.parameter(2 * np.eye(2, dtype=np.float32))
    for scoped in (False, True):
        W1.grad = W2.grad = None
        if scoped:
            with la.batching():
                la.tanh(W1 @ X)
                la.sum(la.tanh(W2 @ X)).backward()
        else:
            la.tanh(W1 @ X)
            la.sum(la.tanh(W2 @ X)).backward()
        assert W1.grad is None and W2.grad is not None


def test_a_finished_scopes_future_refuses_an_eager_backward_through_it():
    W = la.parameter(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    with la.batching():
        h = la.tanh(W @ X)
        loss = la.sum(h)
    with pytest.raises(la.ScopeError, match="finished"):
        loss.backward()
    with pytest.raises(la.ScopeError, match="finished"):
        la.sum(h * W).backward()
    assert W.grad is None
    with la.no_grad(), la.batching():       # computed without gradients: plain data after
        h = la.tanh(W @ X)
    la.sum(h * W).backward()
    np.testing.assert_allclose(W.grad, np.broadcast_to(np.array(h), (2, 2)), rtol=1e-6)


def test_futures_of_scopes_without_trainable_parameters_stay_plain_data():
    with la.batching():
        h = la.tanh(la.array(X) * 2.0)
    W = la.parameter(np.ones(2, np.float32))
    la.sum(h * W).backward()
    np.testing.assert_allclose(W.grad, np.tanh(X * 2.0), rtol=1e-6)


def test_computations_on_parameters_alone_in_a_scope_pass_their_gradient():
    """An L2 penalty: la.sum(W * W) runs eagerly in the scope (no operand varies per node) and
    enters the loss as an input; its gradient (2 W) reaches W as eagerly."""
    W = la.parameter(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    eager, batched = eager_and_batched(lambda: la.sum(la.tanh(W @ X)) + 0.1 * la.sum(W * W), W)
    same(batched[0], eager[0])
    want = 0.2 * np.array([[1.0, 2.0], [3.0, 4.0]]) + np.outer(1 - np.tanh(np.array([[1.0, 2.0], [3.0, 4.0]]) @ X) ** 2, X)
    np.testing.assert_allclose(eager[0], want, rtol=1e-6)


@pytest.mark.parametrize("made", ["input", "eager result", "rows of an eager result"])
def test_values_made_before_the_scope_pass_their_gradient(made):
    """la.array(x, grad=True) and eager results that carry a gradient, made outside the scope
    and read in it: the scope's gradient for them goes on to where they came from."""
    W = la.parameter(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    x = la.array(X, grad=True)
    rows = np.array([1, 0, 1])
    if made == "input":
        before = x
    elif made == "eager result":
        before = la.tanh(W @ x)
    else:
        before = la.tanh(W)

    def loss():
        if made == "rows of an eager result":
            return la.sum(la.stack([before[r] * x for r in rows]) ** 2)
        return la.sum(la.tanh(W @ before) * 3.0)

    eager, batched = eager_and_batched(loss, W, x)
    for g, want in zip(batched, eager):
        same(g, want)


def test_backward_refuses_bad_losses_at_the_call():
    W = la.parameter(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    Wi = la.parameter(np.array([1, 2]))
    for scoped in (False, True):
        with la.batching() if scoped else contextlib.nullcontext():
            with pytest.raises(ValueError, match=r"scalar.*shape \(2,\)"):
                (W @ X).backward()
            with pytest.raises(TypeError, match="float scalar; this one is int64"):
                la.sum(Wi * 2).backward()
            la.sum(W @ X).backward()       # the scope is still usable
        np.testing.assert_allclose(W.grad, np.broadcast_to(X, (2, 2)), rtol=1e-6)
        W.grad = None
    assert not Wi.requires_grad and Wi.grad is None     # integer parameters take no gradient


def test_backward_of_a_failed_scopes_future_refuses():
    W = la.parameter(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    with pytest.raises(RuntimeError):
        with la.batching():
            loss = la.sum(la.tanh(W @ X))
            raise RuntimeError("the user's code failed")
    with pytest.raises(la.ScopeError, match="failed with RuntimeError"):
        loss.backward()
    assert W.grad is None


@pytest.fixture
def sigmoid_without_rule():
    """la.sigmoid as an operator declared without a gradient rule (OpDefs are frozen)."""
    from ops_registry import REGISTRY
    op = REGISTRY["sigmoid"]
    rule = op.vjp
    object.__setattr__(op, "vjp", None)
    yield
    object.__setattr__(op, "vjp", rule)


@pytest.mark.parametrize("where", ["eager", "scope", "eager value read by a scope"])
def test_an_operator_without_a_gradient_rule_is_named_and_nothing_is_updated(sigmoid_without_rule, where):
    W = la.parameter(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    b = la.parameter(np.ones(2, np.float32))
    W.grad = np.full((2, 2), 7.0, np.float32)
    with pytest.raises(NotImplementedError, match="la.sigmoid has no gradient rule"):
        if where == "eager":
            la.sum(la.sigmoid(W @ X) + la.tanh(b)).backward()
        elif where == "scope":
            with la.batching():
                la.sum(la.sigmoid(W @ X) + la.tanh(b)).backward()
        else:
            s = la.sigmoid(W)
            with la.batching():
                la.sum(la.tanh(b * la.array(X)) + s @ X).backward()
    np.testing.assert_array_equal(W.grad, 7.0)
    assert b.grad is None


def test_a_backward_while_other_threads_intern_signatures():
    """The signature table is shared: other threads' scopes intern signatures while a backward
    reads its length (the soak test's race: two reads, 937 and 938, failed with a ValueError)."""
    W = la.parameter(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))

    class Growing:      # the table as another thread's interning leaves it, one more at each read
        def __init__(self, table):
            self.table, self.reads = table, 0

        def __len__(self):
            self.reads += 1
            return len(self.table) + self.reads

        def __getattr__(self, name):
            return getattr(self.table, name)

    with la.batching() as scope:
        la.sum(la.tanh(W @ la.array(X))).backward()
        scope.table = Growing(scope.table)
    np.testing.assert_allclose(W.grad, np.outer(1 - np.tanh(np.array([[1.0, 2.0], [3.0, 4.0]]) @ X) ** 2, X),
                               rtol=1e-5)


def test_integer_parameters_are_constants_and_refuse_a_gradient_at_the_call():
    W = la.parameter(np.array([1, 2]))
    assert not W.requires_grad
    with pytest.raises(TypeError, match=r"requires_grad=True\): only float parameters have gradients, not int64"):
        la.parameter(np.array([1, 2]), requires_grad=True)
    with pytest.raises(TypeError, match="only float parameters can ask for a gradient, not int64"):
        W.requires_grad = True
    p = la.parameter(np.ones(2, np.float32))
    with la.batching():
        la.sum(p * W).backward()          # a float loss through an integer parameter: W gets none
    np.testing.assert_array_equal(p.grad, [1.0, 2.0])
    assert W.grad is None and la.parameter(np.ones(2), requires_grad=False).requires_grad is False


def test_einsum_of_mixed_precisions_passes_the_same_gradient_batched():
    """Found by test_vjps (float64 inputs, float32 parameters, 'ij,jk,kl->il'): einsum's
    contraction order depends on the batch size, and a pair of float32 operands contracted
    first rounded to float32 in one order only (3e-8 apart)."""
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((2, 2)) for _ in range(2)]
    W1, W2 = la.parameter(rng.standard_normal((2, 1)).astype(np.float32)), la.parameter(np.float32([[0.7]]))
    weights = [rng.standard_normal((2, 1)) for _ in range(2)]
    inputs = []

    def loss():
        inputs[:] = [la.array(x, grad=True) for x in xs]
        return la.sum(la.stack([la.sum(la.einsum("ij,jk,kl->il", x, W1, W2) * w) for x, w in zip(inputs, weights)]))

    got = []
    for scoped in (False, True):
        with la.batching() if scoped else contextlib.nullcontext():
            loss().backward()
        got.append([np.array(h.grad) for h in inputs])
        W1.grad = W2.grad = None
    for eager, batched in zip(*got):
        np.testing.assert_allclose(batched, eager, rtol=1e-12)
