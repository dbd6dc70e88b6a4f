"""The training baselines compute the right gradients and updates: the hand-written numpy
backward against central finite differences and against torch autograd of the per-instance
model (float64 copies of the parameters), the torch forms against each other and finite
differences, DyNet against the hand gradients (float32), one optimizer step against the update
written out, and the reference training run. torch and dynet tests skip where not installed."""
import numpy as np
import pytest

from benchmarks import train_hand
from lazyarray.workloads import Params

EPS = 1e-6
LR = 0.1


def _float64(params):
    return Params(**{k: v.astype(np.float64) for k, v in params.items()})


def _coordinates(params, grads, rng, per_param=3):
    """A few random coordinates of every parameter; in a lookup table, of rows the instances
    use (elsewhere both gradients are 0)."""
    for name, value in params.items():
        rows = np.flatnonzero(np.abs(grads[name]).reshape(len(value), -1).sum(axis=1))
        for _ in range(per_param):
            index = tuple(rng.integers(n) for n in value.shape)
            if name in ("E", "C", "E_w"):
                index = (rng.choice(rows),) + index[1:]
            yield name, index


def _check_finite_differences(loss, params, grads, seed=0):
    """Central differences of `loss()` (which reads `params`) at a few coordinates."""
    for name, index in _coordinates(params, grads, np.random.default_rng(seed)):
        value = getattr(params, name)
        old = value[index]
        value[index] = old + EPS
        up = loss()
        value[index] = old - EPS
        down = loss()
        value[index] = old
        fd = (up - down) / (2 * EPS)
        assert abs(fd - grads[name][index]) <= 1e-6 + 1e-5 * abs(fd), (name, index, fd, grads[name][index])


def _assert_grads_close(grads, reference, rtol):
    assert grads.keys() == reference.keys()
    for name, g in grads.items():
        ref = reference[name]
        np.testing.assert_allclose(g, ref, rtol=rtol, atol=rtol * np.abs(ref).max(), err_msg=name)


def _manual_updates(loss_and_grads, params, optimizer, steps, eps=1e-10, inside=False):
    """`steps` updates written out from the gradients, on a copy of `params`; DyNet's Adagrad
    divides by sqrt(G + eps) (`inside`), the others by sqrt(G) + eps."""
    p = Params(**{k: v.copy() for k, v in params.items()})
    sums = {k: np.zeros_like(v) for k, v in p.items()}
    for _ in range(steps):
        _, grads = loss_and_grads(p)
        for name, g in grads.items():
            value = getattr(p, name)
            if optimizer == "sgd":
                value -= LR * g
            else:
                sums[name] += g * g
                value -= LR * g / (np.sqrt(sums[name] + eps) if inside else np.sqrt(sums[name]) + eps)
    return p


# hand-batched numpy

@pytest.mark.parametrize("name", ["treelstm", "bilstm"])
def test_hand_loss_is_the_eager_loss(case, assert_same, name):
    w, params, lazy, instances = case(name)
    loss, _ = train_hand.loss_and_grads(name, params, instances)
    assert_same(loss, w.scope_loss(lazy, instances))


@pytest.mark.parametrize("name", ["treelstm", "bilstm"])
def test_hand_gradients_match_finite_differences(case, name):
    _, params, _, instances = case(name)
    p = _float64(params)
    _, grads = train_hand.loss_and_grads(name, p, instances)
    _check_finite_differences(lambda: train_hand.loss_and_grads(name, p, instances)[0], p, grads)


@pytest.mark.parametrize("name", ["treelstm", "bilstm"])
def test_hand_gradients_match_torch_per_instance(case, name):
    pytest.importorskip("torch")
    from benchmarks import train_torch

    _, params, _, instances = case(name)
    p = _float64(params)
    loss, grads = train_hand.loss_and_grads(name, p, instances)
    torch_loss, torch_grads = train_torch.loss_and_grads(name, p, instances, form="instance")
    assert loss == pytest.approx(torch_loss, rel=1e-12)
    _assert_grads_close(grads, torch_grads, rtol=1e-10)


@pytest.mark.parametrize("name", ["treelstm", "bilstm"])
def test_hand_buffers_carry_nothing_from_step_to_step(case, name):
    """A model reuses its buffers: a big minibatch, then a smaller one, gives what a fresh model
    gives on the smaller one."""
    w, params, _, small = case(name)
    model = train_hand.MODELS[name]()
    model(params, w.data(6, seed=4))
    loss, grads = model(params, small)
    fresh_loss, fresh_grads = train_hand.MODELS[name]()(params, small)
    assert loss == fresh_loss
    for k, g in grads.items():
        fresh = fresh_grads[k]
        if isinstance(g, train_hand.SparseRows):
            np.testing.assert_array_equal(g.rows, fresh.rows)
            g, fresh = g.values, fresh.values
        np.testing.assert_array_equal(g, fresh, err_msg=k)


@pytest.mark.parametrize("optimizer, steps", [("sgd", 1), ("adagrad", 2)])
@pytest.mark.parametrize("name", ["treelstm", "bilstm"])
def test_hand_steps_apply_the_update(case, name, optimizer, steps):
    _, params, _, instances = case(name)
    p = _float64(params)
    expected = _manual_updates(lambda q: train_hand.loss_and_grads(name, q, instances), p, optimizer, steps)
    step = train_hand.make_step(name, p, optimizer, lr=LR)
    for _ in range(steps):
        step(instances)
    for k, v in p.items():
        np.testing.assert_allclose(v, getattr(expected, k), rtol=1e-12, atol=1e-12, err_msg=k)


# PyTorch

MODELS = ["treelstm", "treefc", "bilstm", "latticelstm"]


@pytest.mark.parametrize("form", ["instance", "batched"])
@pytest.mark.parametrize("name", MODELS)
def test_torch_loss_is_the_eager_loss(case, assert_same, name, form):
    pytest.importorskip("torch")
    from benchmarks import train_torch

    w, params, lazy, instances = case(name)
    loss, _ = train_torch.loss_and_grads(name, params, instances, form=form)
    assert_same(loss, np.sum(np.asarray(w.scope_loss(lazy, instances))))


@pytest.mark.parametrize("name", MODELS)
def test_torch_gradients_agree_and_match_finite_differences(case, name):
    torch = pytest.importorskip("torch")
    from benchmarks import train_torch

    _, params, _, instances = case(name)
    p = _float64(params)
    _, grads = train_torch.loss_and_grads(name, p, instances, form="batched")
    _, per_instance = train_torch.loss_and_grads(name, p, instances, form="instance")
    _assert_grads_close(grads, per_instance, rtol=1e-10)
    model, tensors = train_torch.MODELS["batched"][name], train_torch.tensors(p)

    def loss():
        with torch.no_grad():
            return model(tensors, instances).item()

    _check_finite_differences(loss, p, grads)


@pytest.mark.parametrize("optimizer, steps", [("sgd", 1), ("adagrad", 2)])
@pytest.mark.parametrize("name", ["treelstm", "latticelstm"])
def test_torch_steps_apply_the_update(case, name, optimizer, steps):
    pytest.importorskip("torch")
    from benchmarks import train_torch

    _, params, _, instances = case(name)
    p = _float64(params)
    expected = _manual_updates(lambda q: train_torch.loss_and_grads(name, q, instances), p, optimizer, steps)
    step = train_torch.make_step(name, p, optimizer, lr=LR)
    for _ in range(steps):
        step(instances)
    for k, v in p.items():
        np.testing.assert_allclose(v, getattr(expected, k), rtol=1e-12, atol=1e-12, err_msg=k)


def test_reference_run_is_reproducible_and_is_adagrad_on_the_mean_loss(case):
    pytest.importorskip("torch")
    from benchmarks import train_torch

    w, params, _, _ = case("treelstm")
    trees = w.data(8, seed=3)
    before = {k: v.copy() for k, v in params.items()}
    losses = train_torch.reference_losses(params, trees, steps=3, batch=2, lr=LR, seed=5)
    assert losses == train_torch.reference_losses(params, trees, steps=3, batch=2, lr=LR, seed=5)
    assert all(np.array_equal(v, before[k]) for k, v in params.items())
    order = np.random.default_rng(5).permutation(len(trees))
    p = Params(**{k: v.copy() for k, v in params.items()})
    step = train_hand.make_step("treelstm", p, "adagrad", lr=LR)   # Adagrad ignores the loss's scale
    expected = [step([trees[i] for i in order[2 * k:2 * k + 2]]) / 2 for k in range(3)]
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    with pytest.raises(ValueError, match="need 10 trees"):
        train_torch.reference_losses(params, trees, steps=5, batch=2)


# DyNet

@pytest.mark.parametrize("autobatch", [True, False])
@pytest.mark.parametrize("name", ["treelstm", "bilstm"])
def test_dynet_gradients_match_the_hand_gradients(case, name, autobatch):
    pytest.importorskip("dynet")
    from benchmarks import train_dynet

    _, params, _, instances = case(name)
    loss, grads = train_dynet.loss_and_grads(name, params, instances, autobatch=autobatch)
    hand_loss, hand_grads = train_hand.loss_and_grads(name, _float64(params), instances)
    assert loss == pytest.approx(hand_loss, rel=1e-5)
    _assert_grads_close(grads, hand_grads, rtol=1e-5)


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
@pytest.mark.parametrize("name", ["treelstm", "bilstm"])
def test_dynet_step_applies_the_update(case, name, optimizer):
    pytest.importorskip("dynet")
    from benchmarks import train_dynet

    _, params, _, instances = case(name)
    expected = _manual_updates(lambda q: train_dynet.loss_and_grads(name, q, instances), params,
                               optimizer, 1, eps=1e-20, inside=True)
    step = train_dynet.make_step(name, params, optimizer, lr=LR)
    step(instances)
    values = train_dynet.values(step.model)
    for k, v in values.items():
        np.testing.assert_allclose(v, getattr(expected, k), rtol=1e-6, atol=1e-7, err_msg=k)
