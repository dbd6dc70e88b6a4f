"""la.optim: each update against the formula written out and against torch.optim (when torch
imports), sparse row updates (exactly dense for SGD and Adagrad, lazy for Adam and momentum),
in-place updates, clipping, zero_grad, skipped parameters, and training end to end, eagerly and
in a scope. la.save / la.load: a run resumes exactly from a file (parameters, optimizer moments
and step counts), names are checked, nothing loaded aliases anything else, and malformed files
are refused with a clear error."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.array import new_parameter
from lazyarray.checkpoint import FORMAT
from ops_registry.gradients import Rows

V, H, C = 12, 4, 3


def _grads(shape, steps=3, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(steps)]


def _init(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# the formulas, written out per step (p, g, state dict, step t) -> new p

def _ref_sgd(p, g, s, t, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
    g = g + weight_decay * p
    if momentum:
        s["buf"] = g.copy() if t == 1 else momentum * s["buf"] + g
        g = g + momentum * s["buf"] if nesterov else s["buf"]
    return p - lr * g


def _ref_adam(p, g, s, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    g = g + weight_decay * p
    s["m"] = betas[0] * s.get("m", 0) + (1 - betas[0]) * g
    s["v"] = betas[1] * s.get("v", 0) + (1 - betas[1]) * g * g
    m_hat, v_hat = s["m"] / (1 - betas[0] ** t), s["v"] / (1 - betas[1] ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps)


def _ref_adagrad(p, g, s, t, lr=1e-2, eps=1e-10, initial_accumulator_value=0.0, weight_decay=0.0):
    g = g + weight_decay * p
    s["sum"] = s.get("sum", initial_accumulator_value) + g * g
    return p - lr * g / (np.sqrt(s["sum"]) + eps)


CASES = [
    ("SGD", _ref_sgd, {"lr": 0.1}),
    ("SGD", _ref_sgd, {"lr": 0.1, "momentum": 0.9}),
    ("SGD", _ref_sgd, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("Adam", _ref_adam, {}),
    ("Adam", _ref_adam, {"lr": 0.05, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
    ("Adagrad", _ref_adagrad, {}),
    ("Adagrad", _ref_adagrad, {"lr": 0.5, "initial_accumulator_value": 0.1, "weight_decay": 0.01}),
]


@pytest.mark.parametrize("name, ref, kw", CASES)
def test_dense_update_matches_the_formula(name, ref, kw):
    W = la.parameter(_init((C, H)))
    opt = getattr(la.optim, name)([W], **kw)
    expected, state = _init((C, H)).astype(np.float64), {}
    for t, g in enumerate(_grads((C, H)), 1):
        W.grad = g
        opt.step()
        expected = ref(expected, g.astype(np.float64), state, t, **kw)
        np.testing.assert_allclose(W.asnumpy(), expected, rtol=1e-5, atol=1e-6)
        assert W.grad is None       # step clears


@pytest.mark.parametrize("name, ref, kw", CASES)
def test_dense_update_matches_torch(name, ref, kw):
    torch = pytest.importorskip("torch")
    W = la.parameter(_init((C, H)))
    opt = getattr(la.optim, name)([W], **kw)
    tW = torch.tensor(_init((C, H)), requires_grad=True)
    topt = getattr(torch.optim, name)([tW], **kw)
    for g in _grads((C, H)):
        W.grad, tW.grad = g, torch.tensor(g)
        opt.step()
        topt.step()
        np.testing.assert_allclose(W.asnumpy(), tW.detach().numpy(), rtol=1e-5, atol=1e-6)


def _rows(seed, n=6):
    rng = np.random.default_rng(seed)
    return rng.integers(-V, V, n), rng.standard_normal((n, H)).astype(np.float32)


@pytest.mark.parametrize("name, kw", [("SGD", {"lr": 0.3}), ("Adagrad", {"lr": 0.3}),
                                      ("Adagrad", {"lr": 0.3, "initial_accumulator_value": 0.5})])
def test_sparse_rows_equal_the_dense_update(name, kw):
    """A zero gradient row changes neither SGD's nor Adagrad's parameter or accumulator."""
    sparse, dense = la.parameter(_init((V, H))), la.parameter(_init((V, H)))
    opts = [getattr(la.optim, name)([p], **kw) for p in (sparse, dense)]
    for step in range(3):
        idx, vals = _rows(step)
        for part in (slice(0, 3), slice(3, None)):      # two updates, repeated and negative rows
            sparse._scope.add(np, Rows(idx[part], vals[part]))
            dense._scope.add(np, Rows(idx[part], vals[part]).dense(np, (V, H), np.float32))
        assert sparse._scope.parts()[0] is None
        for opt in opts:
            opt.step()
        np.testing.assert_array_equal(sparse.asnumpy(), dense.asnumpy())


def test_adam_and_momentum_on_rows_are_lazy():
    """Only the rows a step touches move, and only their moments change; the step count
    (bias correction) is the table's."""
    for name, kw in [("Adam", {"lr": 0.1}), ("SGD", {"lr": 0.1, "momentum": 0.9})]:
        E = la.parameter(_init((V, H)))
        opt = getattr(la.optim, name)([E], **kw)
        g1, g2 = _grads((2, H), steps=2)
        E._scope.add(np, Rows(np.array([1, 2]), g1))
        opt.step()
        after1 = E.asnumpy().copy()
        slots1 = {k: v.copy() for k, v in opt.state[0].items() if k != "step"}
        E._scope.add(np, Rows(np.array([2, 3]), g2))
        opt.step()
        after2 = E.asnumpy()
        untouched = [i for i in range(V) if i not in (2, 3)]
        np.testing.assert_array_equal(after2[untouched], after1[untouched])     # row 1 keeps still
        for k, v in opt.state[0].items():
            if k != "step":
                np.testing.assert_array_equal(v[untouched], slots1[k][untouched])
        assert opt.state[0]["step"] == 2
        ref = _ref_adam if name == "Adam" else _ref_sgd
        p0 = _init((V, H)).astype(np.float64)
        s2, first = {}, 2 if name == "Adam" else 1     # row 3's first update: at the table's step 2
        r2 = ref(ref(p0[2], g1[1], s2, 1, **kw), g2[0], s2, 2, **kw)
        r3 = ref(p0[3], g2[1], {}, first, **kw)
        np.testing.assert_allclose(after2[2], r2, rtol=1e-5)
        np.testing.assert_allclose(after2[3], r3, rtol=1e-5)


def test_weight_decay_on_rows_touches_only_those_rows():
    E = la.parameter(_init((V, H)))
    opt = la.optim.SGD([E], lr=0.1, weight_decay=0.5)
    E._scope.add(np, Rows(np.array([4]), np.zeros((1, H), np.float32)))
    opt.step()
    expected = _init((V, H))
    expected[4] *= 1 - 0.1 * 0.5
    np.testing.assert_allclose(E.asnumpy(), expected, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
def test_sparse_updates_match_torch_on_an_embedding_table():
    """E[w] lookups: sparse Adagrad, and Adam on rows as torch's SparseAdam (W dense: Adam).
    SparseAdam adds eps before the bias correction of the second moment, Adam (and la.optim)
    after it (eps / sqrt(1 - beta2 ** t) against eps, which matters where a gradient is
    ~eps): compared with a smaller eps."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    batches = [[([1, 2, 2], 0), ([5], 2)], [([3, 1], 1)], [([2, 7, 7, 7], 2), ([0], 0)]]
    for name, kw, sparse_cls in [("Adagrad", {"lr": 0.2}, "Adagrad"), ("Adam", {"lr": 0.05, "eps": 1e-12}, "SparseAdam")]:
        E, W = la.parameter(_init((V, H), 1).astype(np.float64)), la.parameter(_init((C, H), 2).astype(np.float64))
        opt = getattr(la.optim, name)([E, W], **kw)
        tE = torch.tensor(_init((V, H), 1).astype(np.float64), requires_grad=True)
        tW = torch.tensor(_init((C, H), 2).astype(np.float64), requires_grad=True)
        topts = [getattr(torch.optim, sparse_cls)([tE], **kw), getattr(torch.optim, name)([tW], **kw)]
        for batch in batches:
            loss = la.sum(la.stack([-la.log_softmax(W @ la.tanh(la.sum(E[np.array(ws)], axis=0)))[y]
                                    for ws, y in batch]))
            loss.backward()
            assert E._scope.parts()[0] is None and E._scope.parts()[1]     # sparse, up to the step
            opt.step()
            tloss = sum(-F.log_softmax(tW @ torch.tanh(F.embedding(torch.tensor(ws), tE, sparse=True).sum(0)), 0)[y]
                        for ws, y in batch)
            for o in topts:
                o.zero_grad()
            tloss.backward()
            assert tE.grad.is_sparse
            for o in topts:
                o.step()
            np.testing.assert_allclose(float(loss), tloss.item(), rtol=1e-6)
            np.testing.assert_allclose(E.asnumpy(), tE.detach().numpy(), rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(W.asnumpy(), tW.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_updates_are_in_place_and_seen_by_cells_traced_before():
    W = la.parameter(_init((C, H)))
    value = np.asarray(W)

    @la.cell
    def score(W, x):
        return la.sum(la.tanh(W @ x))

    x = _init((H,), 5)
    with la.batching():
        loss = score(W, x)
        loss.backward()
    opt = la.optim.Adam([W], lr=0.1)
    opt.step()
    assert np.asarray(W) is value and opt.params[0] is W
    assert not np.allclose(value, _init((C, H)))
    with la.batching():
        again = score(W, x)
    np.testing.assert_allclose(float(again), np.tanh(value @ x).sum(), rtol=1e-5)


def test_zero_grad_clears_without_applying():
    W = la.parameter(_init((C, H)))
    opt = la.optim.SGD([W], lr=1.0)
    W.grad = np.ones((C, H), np.float32)
    opt.zero_grad()
    assert W.grad is None
    opt.step()
    np.testing.assert_array_equal(W.asnumpy(), _init((C, H)))


def test_parameters_without_gradients_views_and_frozen_ones_are_skipped():
    W, untouched = la.parameter(_init((C, H))), la.parameter(_init((H,)))
    frozen = la.parameter(_init((H,)), requires_grad=False)
    ints = la.parameter(np.arange(4), name="ints")
    view = new_parameter(np.asarray(W).T, base=W._scope, view=lambda g: g.T)
    opt = la.optim.Adam({"W": W, "u": untouched, "f": frozen, "i": ints, "v": view, "W again": W})
    assert opt.params == [W, untouched, frozen, ints]
    W.grad = np.ones((C, H), np.float32)
    frozen.grad = np.ones(H, np.float32)
    opt.step()
    assert opt.state[0]["step"] == 1 and opt.state[1:] == [{}, {}, {}]
    np.testing.assert_array_equal(untouched.asnumpy(), _init((H,)))
    np.testing.assert_array_equal(frozen.asnumpy(), _init((H,)))
    np.testing.assert_array_equal(ints.asnumpy(), np.arange(4))
    assert frozen.grad is None      # cleared all the same


def test_bad_arguments():
    W = la.parameter(_init((C, H)))
    with pytest.raises(ValueError, match="no parameters"):
        la.optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="la.parameter"):
        la.optim.SGD([la.array(_init((H,)))], lr=0.1)
    with pytest.raises(TypeError, match="la.parameter"):
        la.optim.SGD([np.zeros(3)], lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        la.optim.Adam([W], lr=-1)
    with pytest.raises(ValueError, match="betas"):
        la.optim.Adam([W], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="nesterov"):
        la.optim.SGD([W], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="clip"):
        la.optim.Adagrad([W], clip=0)


def test_clip_grad_norm():
    W, E = la.parameter(_init((C, H))), la.parameter(_init((V, H)))
    gW = _grads((C, H))[0]
    idx, vals = _rows(3)
    summed = Rows(idx, vals).dense(np, (V, H), np.float32)
    norm = np.sqrt((gW.astype(np.float64) ** 2).sum() + (summed.astype(np.float64) ** 2).sum())
    W.grad = gW
    E._scope.add(np, Rows(idx, vals))
    assert la.optim.clip_grad_norm([W, E], 1e3) == pytest.approx(norm, rel=1e-5)    # under: unchanged
    np.testing.assert_array_equal(W.grad, gW)
    total = la.optim.clip_grad_norm([W, E], 1.0)
    assert total == pytest.approx(norm, rel=1e-5)
    assert E._scope.parts()[0] is None          # still sparse
    np.testing.assert_allclose(W.grad, gW / (norm + 1e-6), rtol=1e-5)
    np.testing.assert_allclose(E.grad, summed / (norm + 1e-6), rtol=1e-5, atol=1e-7)
    assert la.optim.clip_grad_norm([W, E], 1.0) == pytest.approx(1.0, rel=1e-5)


def test_clip_option_equals_clipping_then_stepping():
    a, b = la.parameter(_init((V, H))), la.parameter(_init((V, H)))
    opt_a, opt_b = la.optim.Adagrad([a], lr=0.1, clip=0.5), la.optim.Adagrad([b], lr=0.1)
    for step in range(3):
        idx, vals = _rows(step)
        a._scope.add(np, Rows(idx, vals))
        b._scope.add(np, Rows(idx, vals))
        opt_a.step()
        la.optim.clip_grad_norm([b], 0.5)
        opt_b.step()
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_clip_matches_torch():
    torch = pytest.importorskip("torch")
    gs = _grads((C, H)) + _grads((H,), steps=1)
    ps = [la.parameter(np.zeros_like(g)) for g in gs]
    ts = [torch.zeros(g.shape, requires_grad=True) for g in gs]
    for p, t, g in zip(ps, ts, gs):
        p.grad, t.grad = g * 3, torch.tensor(g * 3)
    assert la.optim.clip_grad_norm(ps, 2.0) == pytest.approx(float(torch.nn.utils.clip_grad_norm_(ts, 2.0)), rel=1e-6)
    for p, t in zip(ps, ts):
        np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-6)


# end to end: a tiny bag-of-words classifier with an embedding table

BATCHES = [[([1, 2, 2], 0), ([5, 11], 2)], [([3, 1], 1), ([0], 0)], [([2, 7, 7], 2)], [([9, 1], 1), ([4], 2)]]


def make_model(seed=0):
    rng = np.random.default_rng(seed)
    return {"E": la.parameter(rng.standard_normal((V, H)).astype(np.float32) * 0.5, name="E"),
            "W": la.parameter(rng.standard_normal((C, H)).astype(np.float32) * 0.5, name="W"),
            "b": la.parameter(np.zeros(C, np.float32), name="b")}


def model_loss(p, batch):
    terms = []
    for words, label in batch:
        h = la.tanh(la.sum(la.stack([p["E"][w] for w in words]), axis=0))
        terms.append(-la.log_softmax(p["W"] @ h + p["b"])[label])
    return la.sum(la.stack(terms))


def train(p, opt, batches, mode="eager"):
    """Losses of one step per batch: eagerly, in a scope, or in a scope that steps inside."""
    losses = []
    for batch in batches:
        if mode == "eager":
            loss = model_loss(p, batch)
            loss.backward()
        else:
            with la.batching():
                loss = model_loss(p, batch)
                loss.backward()
                if mode == "step inside":
                    opt.step()
        if mode != "step inside":
            opt.step()
        losses.append(float(loss))
    return losses


@pytest.mark.parametrize("name, kw", [("SGD", {"lr": 0.5, "momentum": 0.5}), ("Adam", {"lr": 0.05}),
                                      ("Adagrad", {"lr": 0.3, "clip": 1.0})])
def test_training_eagerly_and_in_a_scope_agree(name, kw):
    runs = {}
    for mode in ("eager", "scope", "step inside"):
        p = make_model()
        opt = getattr(la.optim, name)(p.values(), **kw)
        runs[mode] = train(p, opt, BATCHES * 2, mode), {k: v.asnumpy() for k, v in p.items()}
    losses, params = runs["eager"]
    assert losses[-1] < losses[len(BATCHES) - 1]          # the second epoch learned something
    for mode in ("scope", "step inside"):
        np.testing.assert_allclose(runs[mode][0], losses, rtol=1e-5)
        for k in params:
            np.testing.assert_allclose(runs[mode][1][k], params[k], rtol=1e-4, atol=1e-6)


# la.save / la.load

OPTIMIZERS = [("Adam", {"lr": 0.05}), ("SGD", {"lr": 0.3, "momentum": 0.9, "weight_decay": 0.01}),
              ("Adagrad", {"lr": 0.3, "clip": 1.0})]


@pytest.mark.parametrize("name, kw", OPTIMIZERS)
@pytest.mark.parametrize("mode", ["eager", "scope"])
def test_a_run_resumes_exactly(tmp_path, name, kw, mode):
    p = make_model()
    opt = getattr(la.optim, name)(p.values(), **kw)
    train(p, opt, BATCHES[:3], mode)
    opt.lr *= 0.5                                   # a schedule the file must keep
    la.save(tmp_path / "run.npz", p, opt)
    expected = train(p, opt, BATCHES[1:] + BATCHES[:2], mode)

    fresh = make_model(seed=7)
    opt2 = getattr(la.optim, name)(fresh.values(), **{**kw, "lr": 1.0})
    la.load(tmp_path / "run.npz", into=fresh, optimizer=opt2)
    assert opt2.lr == opt.lr
    assert train(fresh, opt2, BATCHES[1:] + BATCHES[:2], mode) == expected
    for k in p:
        np.testing.assert_array_equal(fresh[k].asnumpy(), p[k].asnumpy())
    for s, s2 in zip(opt.state, opt2.state):
        assert s.keys() == s2.keys()
        for k in s:
            np.testing.assert_array_equal(s2[k], s[k])


def test_load_returns_numpy_arrays_by_name_and_never_aliases(tmp_path):
    p = make_model()
    opt = la.optim.Adam(p.values(), lr=0.1)
    train(p, opt, BATCHES[:1])
    la.save(tmp_path / "m", list(p.values()), opt)     # names: the parameters' own
    assert (tmp_path / "m").exists() and [f.name for f in tmp_path.iterdir()] == ["m"]   # as named, no temp left
    loaded = la.load(tmp_path / "m")
    assert sorted(loaded) == ["E", "W", "b"]
    for k, v in loaded.items():
        assert type(v) is np.ndarray
        np.testing.assert_array_equal(v, p[k].asnumpy())
    a, b = make_model(1), make_model(2)
    opt_a, opt_b = la.optim.Adam(a.values()), la.optim.Adam(b.values())
    la.load(tmp_path / "m", into=a, optimizer=opt_a)
    la.load(tmp_path / "m", into=b, optimizer=opt_b)
    for k in a:
        assert not np.shares_memory(np.asarray(a[k]), np.asarray(b[k]))
        assert not np.shares_memory(np.asarray(a[k]), loaded[k])
    for sa, sb in zip(opt_a.state, opt_b.state):
        for k in ("exp_avg", "exp_avg_sq"):
            assert not np.shares_memory(sa[k], sb[k])
    train(a, opt_a, BATCHES[1:2])
    np.testing.assert_array_equal(b["W"].asnumpy(), loaded["W"])


def test_names_are_checked(tmp_path):
    p = make_model()
    with pytest.raises(ValueError, match="name 'W' given twice"):
        la.save(tmp_path / "x.npz", [p["W"], la.parameter(np.zeros(2), name="W")])
    with pytest.raises(ValueError, match="parameter 'E' .again as 'F'. given twice"):
        la.save(tmp_path / "x.npz", {"E": p["E"], "F": p["E"]})
    with pytest.raises(TypeError, match="la.parameter"):
        la.save(tmp_path / "x.npz", {"x": la.array(np.zeros(2))})
    opt = la.optim.SGD(p.values(), lr=0.1)
    with pytest.raises(ValueError, match="the optimizer updates 'b', which params does not hold"):
        la.save(tmp_path / "x.npz", {"E": p["E"], "W": p["W"]}, opt)
    la.save(tmp_path / "x.npz", {"E": p["E"], "W": p["W"]})
    q = make_model(3)
    before = {k: v.asnumpy().copy() for k, v in q.items()}
    with pytest.raises(ValueError, match="no parameter named 'b' in the file"):
        la.load(tmp_path / "x.npz", into=q)
    with pytest.raises(ValueError, match="the file's 'W' match no parameter given"):
        la.load(tmp_path / "x.npz", into={"E": q["E"]})
    with pytest.raises(ValueError, match=r"'W' is float32\[3, 4\] in the file, float32\[4, 3\] here"):
        la.load(tmp_path / "x.npz", into={"E": q["E"], "W": la.parameter(np.zeros((4, 3), np.float32))})
    with pytest.raises(ValueError, match="needs into="):
        la.load(tmp_path / "x.npz", optimizer=opt)
    with pytest.raises(ValueError, match="holds no optimizer state"):
        la.load(tmp_path / "x.npz", into={"E": q["E"], "W": q["W"]}, optimizer=la.optim.SGD([q["E"]], lr=1))
    for k, v in q.items():                          # nothing written by a refused load
        np.testing.assert_array_equal(v.asnumpy(), before[k])


def _write(path, **arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def test_malformed_files_are_refused(tmp_path):
    p = make_model()
    bad = tmp_path / "bad"
    bad.write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match="not a lazyarray parameter file"):
        la.load(bad)
    np.save(tmp_path / "one.npy", np.zeros(3))
    with pytest.raises(ValueError, match="single .npy array"):
        la.load(tmp_path / "one.npy")
    bad.write_bytes((tmp_path / "one.npy").read_bytes()[:20])
    with pytest.raises(ValueError, match="not a lazyarray parameter file"):
        la.load(bad)
    _write(bad, **{"param/E": np.zeros(3)})
    with pytest.raises(ValueError, match="no 'lazyarray.format'"):
        la.load(bad)
    _write(bad, **{"lazyarray.format": np.array(FORMAT + 1)})
    with pytest.raises(ValueError, match="format 2"):
        la.load(bad)
    _write(bad, **{"lazyarray.format": np.array(FORMAT), "param/E": np.array([None, 1], dtype=object)})
    with pytest.raises(ValueError, match="not a lazyarray parameter file.*pickle"):
        la.load(bad)
    _write(bad, **{"lazyarray.format": np.array(FORMAT), "param/E": np.array(["a"])})
    with pytest.raises(ValueError, match="not numeric"):
        la.load(bad)
    _write(bad, **{"lazyarray.format": np.array(FORMAT), "other": np.zeros(2)})
    with pytest.raises(ValueError, match="unknown entries 'other'"):
        la.load(bad)
    with pytest.raises(FileNotFoundError):
        la.load(tmp_path / "missing.npz")

    opt = la.optim.Adam(p.values(), lr=0.1)
    train(p, opt, BATCHES[:1])
    good = tmp_path / "good.npz"
    la.save(good, p, opt)
    arrays = dict(np.load(good))

    def refused(match, optimizer=la.optim.Adam, **changes):
        _write(bad, **{k: v for k, v in {**arrays, **changes}.items() if v is not None})
        q = make_model(5)
        with pytest.raises(ValueError, match=match):
            la.load(bad, into=q, optimizer=optimizer(q.values(), lr=1.0))

    refused("state of a SGD optimizer, not of a Adam", **{"optim/class": np.array("SGD")})
    refused("not of a SGD", optimizer=la.optim.SGD)
    refused("the optimizer updates 'Z', which into does not hold",
            optimizer=lambda ps, lr: la.optim.Adam([*ps, la.parameter(np.zeros(2), name="Z")], lr=lr))
    refused("hyperparameter 'betas' is missing", **{"optim/betas": None})
    refused("betas must be two numbers", **{"optim/betas": np.array([0.9, 2.0])})
    refused("'lr' is a <U1", **{"optim/lr": np.array(["x"])})
    refused("unknown optimizer entries 'optim/momentum'", **{"optim/momentum": np.array(0.9)})
    refused("'state/exp_avg/E' is float64", **{"state/exp_avg/E": arrays["state/exp_avg/E"].astype(np.float64)})
    refused("keeps no slot 'momentum_buffer'", **{"state/momentum_buffer/E": arrays["state/exp_avg/E"]})
    refused("'state/exp_avg/Z' is for no parameter", **{"state/exp_avg/Z": arrays["state/exp_avg/E"]})
    refused("step count >= 1", **{"state/step/W": np.array(0)})
    refused("state of 'W' has no step count", **{"state/step/W": None})


@pytest.mark.gpu
def test_cupy_parameters_train_and_round_trip_as_numpy_ones(tmp_path):
    cupy = pytest.importorskip("cupy", reason="cupy is not installed (GPU tests run on GPU machines)")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # pragma: no cover - depends on the machine
        pytest.skip(f"no usable GPU: {error}")
    for name, kw in OPTIMIZERS:
        host = {"E": la.parameter(_init((V, H)), name="E"), "W": la.parameter(_init((C, H), 2), name="W")}
        dev = {k: la.parameter(cupy.asarray(v.asnumpy()), name=k) for k, v in host.items()}
        opts = [getattr(la.optim, name)(p, **kw) for p in (host, dev)]
        for step, gW in enumerate(_grads((C, H))):
            idx, vals = _rows(step)
            for p, opt, xp in zip((host, dev), opts, (np, cupy)):
                p["E"]._scope.add(xp, Rows(xp.asarray(idx), xp.asarray(vals)))
                p["W"].grad = xp.asarray(gW)
                opt.step()
        for k in host:
            np.testing.assert_allclose(cupy.asnumpy(dev[k]._value), host[k].asnumpy(), rtol=1e-5, atol=1e-6)
        la.save(tmp_path / "dev.npz", dev, opts[1])
        fresh = {k: la.parameter(cupy.zeros(v.shape, v.dtype), name=k) for k, v in host.items()}
        opt = getattr(la.optim, name)(fresh, **kw)
        la.load(tmp_path / "dev.npz", into=fresh, optimizer=opt)
        for k in host:
            assert isinstance(fresh[k]._value, cupy.ndarray)
            np.testing.assert_array_equal(cupy.asnumpy(fresh[k]._value), cupy.asnumpy(dev[k]._value))
        assert all(isinstance(v, cupy.ndarray) for s in opt.state for k, v in s.items() if k != "step")
