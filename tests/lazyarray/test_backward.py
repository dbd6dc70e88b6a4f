"""Backward bugs found by the gradient hunt (tests/ops_registry/test_vjps.py, the gradient tests
of test_random_programs.py and test_cell.py), each as its smallest repro: the gradient a scope
gives equals the eager one, which equals finite differences."""
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


@pytest.mark.xfail(strict=True, raises=la.ScopeError,
                   reason="eager W.T is a tape node, not a parameter view: used in a scope it is data, and "
                          "backward() raises a ScopeError saying it was computed in the scope")
def test_a_view_of_a_parameter_made_before_the_scope_passes_its_gradient():
    W = la.parameter(np.arange(1.0, 5.0, dtype=np.float32).reshape(2, 2))
    WT = W.T
    eager, batched = eager_and_batched(lambda: la.sum(la.tanh(WT @ la.array(X))), W)
    same(batched[0], eager[0])


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="grad.flush: complex values get no gradient base (gbase and needs accept kind 'f' only), "
                          "so a gradient through x * 1j is dropped without an error")
def test_gradients_through_complex_values_in_a_scope():
    """|x * c + d| of a real parameter x: eagerly (tests/ops_registry/test_vjps.py checks it
    against finite differences) and in a scope."""
    x = la.parameter(np.array([1.0, 2.0], np.float32))
    eager, batched = eager_and_batched(lambda: la.sum(la.abs(la.array(X) * (0.3 - 0.8j) + x)), x)
    same(batched[0], eager[0])


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="ops.eager keeps a numpy operand by reference in the tape's Node: the backward reads "
                          "the buffer as it is then, not as the call read it")
def test_eager_backward_reads_operands_as_called():
    """A scope copies a numpy operand when recorded (README: refilling a buffer between calls
    gives each call the value it had); eagerly the gradient must use that value too."""
    p = la.parameter(np.ones(3, np.float32))
    buf = np.full(3, 2.0, np.float32)
    y = p * buf
    buf[...] = 5.0
    la.sum(y).backward()
    np.testing.assert_array_equal(p.grad, [2.0, 2.0, 2.0])


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="an outer scope's future used in an inner scope enters it as data without being marked "
                          "detached: backward() gives W no gradient and raises nothing")
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


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="a finished scope's future used in a later scope is data with no gradient: backward() "
                          "gives W none and raises nothing")
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


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="grad.flush.Backward.run gives every input that asked for a gradient the rows of its "
                          "base, zeros where the loss did not reach it; eagerly it is None")
def test_values_the_loss_does_not_reach_get_no_gradient():
    """README: p.grad is None for parameters the backward does not reach; inputs likewise."""
    with la.batching():
        a, b = la.array(X, grad=True), la.array(X, grad=True)
        la.sum(la.tanh(a)).backward()
    assert a.grad is not None and b.grad is None


@pytest.mark.xfail(strict=True, raises=ImportError,
                   reason="grad.handles._set_grad asks _xp(self._value) for the array module, and a handle of an "
                          "active scope has no _value: it imports cupy (ModuleNotFoundError on CPUs)")
def test_setting_the_gradient_of_an_input_inside_its_scope():
    with la.batching():
        x = la.array(X, grad=True)
        la.sum(x * 2.0).backward()
        x.grad = np.zeros(2, np.float32)
        np.testing.assert_array_equal(x.grad, [0.0, 0.0])


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="grad.flush.Backward.needs reads self.ex.bases[recipe[1]] for a slice operand without "
                          "the run's shift: a flush replayed from the plan cache at another position reads another "
                          "base (here an int one: no gradient; or past the end: IndexError)")
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
