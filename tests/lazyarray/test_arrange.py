"""Weight arrangement in cell bodies (lazyarray.arrange, ED-Batch §3 / Table 2): products of
distinct parameters over one operand (gates written with separate weights) run as one kernel
over arranged weights; results equal eager execution; parameters stay the single source of truth
under in-place updates (weights are arranged once per flush, never kept stale)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyarray as la
from lazyarray import arrange
from lazyarray.arrange import ArrangedStep

H = 4
SCHEDULERS = ["depth", "agenda"]


def rng_for(seed):
    return np.random.default_rng(seed)


def params(rng, *shape, dtype=np.float32):
    return la.parameter((rng.standard_normal(shape) * 0.5).astype(dtype))


class Bundle:
    """A parameter bundle passed to cells as a static argument."""

    def __init__(self, **kw):
        vars(self).update(kw)


def lstm_params(rng, H=H):
    return Bundle(**{f"W_{g}": params(rng, H, 2 * H) for g in "ifou"}, **{f"b_{g}": params(rng, H) for g in "ifou"})


def lstm_gates(p, x, h, c):
    """LSTM step with one weight per gate."""
    xh = la.concatenate([x, h])
    i = la.sigmoid(p.W_i @ xh + p.b_i)
    f = la.sigmoid(p.W_f @ xh + p.b_f)
    o = la.sigmoid(p.W_o @ xh + p.b_o)
    u = la.tanh(p.W_u @ xh + p.b_u)
    c = f * c + i * u
    return o * la.tanh(c), c


def gru_params(rng, H=H):
    return Bundle(W_z=params(rng, H, 2 * H), W_r=params(rng, H, 2 * H), W_h=params(rng, H, 2 * H),
                  b_z=params(rng, H), b_r=params(rng, H), b_h=params(rng, H))


def gru_gates(p, x, h):
    """GRU step with one weight per gate: z, r share [x; h]; the candidate depends on r."""
    xh = la.concatenate([x, h])
    z = la.sigmoid(p.W_z @ xh + p.b_z)
    r = la.sigmoid(p.W_r @ xh + p.b_r)
    h_new = la.tanh(p.W_h @ la.concatenate([x, r * h]) + p.b_h)
    return (1 - z) * h + z * h_new


def arranged_steps(plan):
    return [s for s in plan.steps if isinstance(s, ArrangedStep)]


def plan_of(cell):
    """The traced plan of the last signature of ``cell`` (interned process-wide)."""
    from lazyarray.scope import SIGNATURES
    sigs = [entry[0] for key, entry in SIGNATURES.entries.items() if key and key[0] == cell.key]
    return SIGNATURES.table.payload[max(sigs)].plan


def vec(rng, *shape):
    return rng.standard_normal(shape or (H,)).astype(np.float32)


def run_chains(cell, p, inputs, state, steps=3):
    """Each instance runs ``steps`` cell calls (an RNN); returns all outputs."""
    outs = []
    for x in inputs:
        s = state
        for _ in range(steps):
            s = cell(p, x, *s) if isinstance(s, tuple) else cell(p, x, s)
            outs.append(s[0] if isinstance(s, tuple) else s)
    return outs


def assert_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)


# -- separate-gate cells equal eager, with fewer kernels ----------------------------------------

@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_lstm_with_gate_weights_is_one_merged_step_and_equals_eager(scheduler):
    rng = rng_for(1)
    p = lstm_params(rng)
    merged, plain = la.cell(lstm_gates), la.cell(lstm_gates)
    xs = [vec(rng) for _ in range(5)]
    zero = (la.array(np.zeros(H, np.float32)), la.array(np.zeros(H, np.float32)))
    eager = run_chains(lstm_gates, p, xs, zero)
    with arrange.disabled():
        with la.batching(scheduler=scheduler) as off:
            base = run_chains(plain, p, xs, zero)
    with la.batching(scheduler=scheduler) as on:
        got = run_chains(merged, p, xs, zero)
    assert_close(got, eager)
    assert_close(base, eager)
    (step,) = arranged_steps(plan_of(merged))
    assert step.kind == "rows" and len(step.members) == 4
    assert not arranged_steps(plan_of(plain))
    # 4 products -> 1 kernel, and sigmoid(i), sigmoid(f), sigmoid(o) -> 1 kernel over adjacent parts
    assert plan_of(plain).kernels - plan_of(merged).kernels == 3 + 2
    # 5 per batch of calls (3 batches: the RNN steps), less the weights and biases arranged once,
    # plus a column-major copy of each weight that a later small batch reads (arrange.weight):
    # the 4 gate weights without arrangement, the merged one with
    assert arrange.WARMUP < 3
    assert off.stats.kernels - on.stats.kernels == 5 * 3 - 2 + (4 - 1)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_gru_with_gate_weights_merges_z_and_r_only(scheduler):
    rng = rng_for(2)
    p = gru_params(rng)
    merged, plain = la.cell(gru_gates), la.cell(gru_gates)
    xs = [vec(rng) for _ in range(4)]
    h0 = la.array(vec(rng))
    eager = run_chains(gru_gates, p, xs, h0)
    with arrange.disabled(), la.batching(scheduler=scheduler):
        base = run_chains(plain, p, xs, h0)
    with la.batching(scheduler=scheduler):
        got = run_chains(merged, p, xs, h0)
    assert_close(got, eager)
    assert_close(base, eager)
    (step,) = arranged_steps(plan_of(merged))
    assert len(step.members) == 2   # W_h reads r * h: dependent, not merged
    assert plan_of(plain).kernels - plan_of(merged).kernels == 2  # products 2 -> 1, sigmoids 2 -> 1


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_treelstm_with_gate_weights_over_trees_equals_eager(scheduler):
    rng = rng_for(3)
    E = params(rng, 9, H)
    U = {g: params(rng, H, 2 * H) for g in ("i", "fl", "fr", "o", "u")}
    b = {g: params(rng, H) for g in U}

    def internal(hl, cl, hr, cr):
        hh = la.concatenate([hl, hr])
        g = {k: U[k] @ hh + b[k] for k in U}
        c = la.sigmoid(g["i"]) * la.tanh(g["u"]) + la.sigmoid(g["fl"]) * cl + la.sigmoid(g["fr"]) * cr
        return la.sigmoid(g["o"]) * la.tanh(c), c

    node = la.cell(internal)

    def encode(tree, cell):
        if isinstance(tree, int):
            x = la.tanh(E[tree])
            return x, x * 0.5
        return cell(*encode(tree[0], cell), *encode(tree[1], cell))

    trees = [((1, 2), 3), (4, (5, (6, 7))), 8, ((0, 1), (2, 3))]
    eager = [encode(t, internal)[0].asnumpy() for t in trees]
    with la.batching(scheduler=scheduler):
        got = [encode(t, node)[0] for t in trees]
    assert_close(got, eager)
    (step,) = arranged_steps(plan_of(node))
    assert len(step.members) == 5 and step.weights.current(np, la.Stats(), {}).shape == (5 * H, 2 * H)


def test_stacked_products_over_distinct_operands_are_one_batched_matmul():
    rng = rng_for(4)
    Wa, Wb, Wc = (params(rng, H, H) for _ in range(3))
    ba, bb, bc = (params(rng, H) for _ in range(3))

    def body(x, y, z):
        return la.tanh(Wa @ x + ba) + la.tanh(Wb @ y + bb) * la.sigmoid(Wc @ z + bc)

    cell = la.cell(body)
    inputs = [(vec(rng), vec(rng), vec(rng)) for _ in range(6)]
    eager = [body(*map(la.array, i)).asnumpy() for i in inputs]
    with la.batching():
        got = [cell(*i) for i in inputs]
    assert_close(got, eager)
    (step,) = arranged_steps(plan_of(cell))
    assert step.kind == "stack" and len(step.members) == 3


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_products_already_joined_by_the_body_scheduler_merge_too(scheduler):
    """W_a @ x, W_a @ y (one joined step) with W_b @ x, W_b @ y: rows; with W_b @ z, W_b @ w:
    a stack; members are (product, position)."""
    rng = rng_for(11)
    Wa, Wb = params(rng, H, H), params(rng, H, H)
    ba, bb = params(rng, H), params(rng, H)

    def rows(x, y):
        return la.tanh(Wa @ x + ba) * la.sigmoid(Wb @ x + bb) + la.tanh(Wa @ y + ba) * la.sigmoid(Wb @ y + bb)

    def stack(x, y, z, w):
        return la.tanh(Wa @ x + ba) * la.sigmoid(Wb @ z + bb) - la.tanh(Wa @ y + ba) * la.sigmoid(Wb @ w + bb)

    for body, kind in ((rows, "rows"), (stack, "stack")):
        cell = la.cell(body)
        n = body.__code__.co_argcount
        inputs = [[vec(rng) for _ in range(n)] for _ in range(5)]
        with la.batching(scheduler=scheduler):
            got = [cell(*i) for i in inputs]
        assert_close(got, [body(*map(la.array, i)).asnumpy() for i in inputs])
        (step,) = arranged_steps(plan_of(cell))
        assert step.kind == kind and len(step.xrefs) == 2 and len(step.xrefs[0]) == 2


# -- what is not merged -------------------------------------------------------------------------

def test_mixed_shapes_dtypes_and_dependent_products_are_not_merged():
    rng = rng_for(5)
    W32, W64 = params(rng, H, H), params(rng, H, H, dtype=np.float64)
    Wsmall, Wbig = params(rng, H, H), params(rng, 2 * H, H)
    W1, W2 = params(rng, H, H), params(rng, H, H)

    bodies = {
        "dtypes": lambda x: la.sum(W32 @ x) + la.sum(W64 @ x),           # same x, other dtype
        "shapes": lambda x, y: la.sum(Wsmall @ x) + la.sum(Wbig @ y),    # other operands, other shapes
        "dependent": lambda x: W2 @ la.tanh(W1 @ x),                     # equal shapes, dependent
        "chain": lambda x: W2 @ (W1 @ x),                                # a product of a product
    }
    for name, body in bodies.items():
        nargs = body.__code__.co_argcount
        cell = la.cell(body)
        inputs = [[vec(rng) for _ in range(nargs)] for _ in range(3)]
        eager = [body(*map(la.array, i)).asnumpy() for i in inputs]
        with la.batching():
            got = [cell(*i) for i in inputs]
        assert_close(got, eager)
        assert not arranged_steps(plan_of(cell)), name


def test_unequal_row_counts_over_one_operand_merge_as_views():
    rng = rng_for(6)
    Wa, Wb = params(rng, H, 3), params(rng, 2 * H, 3)
    body = lambda x: la.concatenate([la.tanh(Wa @ x), la.sigmoid(Wb @ x + 1.0)])  # noqa: E731
    cell = la.cell(body)
    inputs = [vec(rng, 3) for _ in range(4)]
    with la.batching():
        got = [cell(x) for x in inputs]
    assert_close(got, [body(la.array(x)).asnumpy() for x in inputs])
    # matmul and affine are different ops: not merged together
    assert not arranged_steps(plan_of(cell))
    body2 = lambda x: la.concatenate([la.tanh(Wa @ x + 2.0), la.sigmoid(Wb @ x + 1.0)])  # noqa: E731
    cell2 = la.cell(body2)
    with la.batching():
        got = [cell2(x) for x in inputs]
    assert_close(got, [body2(la.array(x)).asnumpy() for x in inputs])
    (step,) = arranged_steps(plan_of(cell2))
    assert step.synthetic is None and step.rows == [(0, H), (H, 3 * H)]


def test_matrix_operands_and_shared_or_broadcast_biases():
    rng = rng_for(7)
    Wa, Wb, Wc = (params(rng, H, H) for _ in range(3))
    b_shared = params(rng, H, 1)
    b_row = params(rng, 3)

    def body(X):  # X: (H, 3) per call
        return la.tanh(Wa @ X + b_shared) + la.tanh(Wb @ X + b_shared) * (Wc @ X + b_row)

    cell = la.cell(body)
    inputs = [vec(rng, H, 3) for _ in range(5)]
    with la.batching():
        got = [cell(x) for x in inputs]
    assert_close(got, [body(la.array(x)).asnumpy() for x in inputs])
    (step,) = arranged_steps(plan_of(cell))
    assert len(step.members) == 3 and step.bias.current(np, la.Stats(), {}).shape == (3 * H, 3)


# -- parameters: arranged once per flush, updated in place, never stale -------------------------

def test_in_place_updates_between_scopes_are_seen_and_weights_are_arranged_once_per_flush():
    rng = rng_for(8)
    raw = {g: (rng.standard_normal((H, 2 * H)) * 0.5).astype(np.float32) for g in "ifou"}
    p = Bundle(**{f"W_{g}": la.parameter(raw[g]) for g in "ifou"},
               **{f"b_{g}": params(rng, H) for g in "ifou"})
    cell = la.cell(lstm_gates)
    xs = [vec(rng) for _ in range(3)]
    zero = (la.array(np.zeros(H, np.float32)), la.array(np.zeros(H, np.float32)))

    def check():
        with la.batching() as scope:
            got = run_chains(cell, p, xs, zero, steps=3)
        assert_close(got, run_chains(lstm_gates, p, xs, zero, steps=3))
        return scope.stats

    plain = check()
    (step,) = arranged_steps(plan_of(cell))
    assert plain.copied_bytes >= 4 * H * 2 * H * 4  # the weights, once for the three steps' batches
    raw["f"][...] *= -2.0                            # an optimizer step, through the user's array
    np.asarray(p.b_o)[...] += 1.0                    # ... or through the parameter
    check()
    assert raw["f"].flags.writeable and np.shares_memory(np.asarray(p.W_f), raw["f"])

    with la.batching():                              # an update between two flushes of one scope
        first = run_chains(cell, p, xs, zero, steps=1)
        float(la.sum(first[0]))
        raw["i"][...] *= 0.5
        second = run_chains(cell, p, xs, zero, steps=1)
    assert_close(second, run_chains(lstm_gates, p, xs, zero, steps=1))


def test_parameters_already_consecutive_in_one_buffer_are_merged_without_a_copy():
    rng = rng_for(9)
    flat = (rng.standard_normal(4 * H * 2 * H) * 0.5).astype(np.float32)
    views = flat.reshape(4, H, 2 * H)
    p = Bundle(**{f"W_{g}": la.parameter(views[j]) for j, g in enumerate("ifou")},
               **{f"b_{g}": params(rng, H) for g in "ifou"})
    cell = la.cell(lstm_gates)
    xs = [vec(rng) for _ in range(3)]
    zero = (la.array(np.zeros(H, np.float32)), la.array(np.zeros(H, np.float32)))
    with la.batching():
        got = run_chains(cell, p, xs, zero, steps=2)
    assert_close(got, run_chains(lstm_gates, p, xs, zero, steps=2))
    (step,) = arranged_steps(plan_of(cell))
    stats = la.Stats()
    assert np.shares_memory(step.weights.current(np, stats, {}), flat)
    assert stats.copied_bytes == 0 and stats.kernels == 0  # weights read in place
    step.bias.current(np, stats, {})
    assert stats.copied_bytes == 4 * H * 4                 # biases (separate arrays) concatenated
    flat *= 0.25                                         # updated through the user's buffer
    with la.batching():
        got = run_chains(cell, p, xs, zero, steps=2)
    assert_close(got, run_chains(lstm_gates, p, xs, zero, steps=2))


def test_views_of_a_user_buffer_that_are_not_consecutive_are_concatenated():
    rng = rng_for(10)
    flat = (rng.standard_normal(3 * H * H) * 0.5).astype(np.float32)
    Wa, Wb = la.parameter(flat[:H * H].reshape(H, H)), la.parameter(flat[2 * H * H:].reshape(H, H))  # not adjacent
    body = lambda x: la.tanh(Wa @ x) * la.tanh(Wb @ x)  # noqa: E731
    cell = la.cell(body)
    inputs = [vec(rng) for _ in range(3)]
    with la.batching():
        got = [cell(x) for x in inputs]
    assert_close(got, [body(la.array(x)).asnumpy() for x in inputs])
    assert arranged_steps(plan_of(cell))
    flat[2 * H * H:] += 1.0
    with la.batching():
        got = [cell(x) for x in inputs]
    assert_close(got, [body(la.array(x)).asnumpy() for x in inputs])


# -- random bodies ------------------------------------------------------------------------------

@st.composite
def product_bodies(draw):
    """Instructions over values v0, v1 (the arguments; vectors of length H):
    ("prod", weight index, operand, with bias), ("tanh", operand), ("mul", a, b)."""
    nweights = draw(st.integers(2, 5))
    shapes = [draw(st.sampled_from([(H, H), (H, H), (2 * H, H), (H, H)])) for _ in range(nweights)]
    code, kinds = [], [H, H]  # per value: its length
    for _ in range(draw(st.integers(2, 9))):
        what = draw(st.sampled_from(["prod", "prod", "prod", "tanh", "mul"]))
        vecs = [i for i, n in enumerate(kinds) if n == H]
        if what == "prod":
            w = draw(st.integers(0, nweights - 1))
            code.append(("prod", w, draw(st.sampled_from(vecs)), draw(st.booleans())))
            kinds.append(shapes[w][0])
        elif what == "tanh":
            a = draw(st.integers(0, len(kinds) - 1))
            code.append(("tanh", a))
            kinds.append(kinds[a])
        else:
            a = draw(st.integers(0, len(kinds) - 1))
            same = [i for i, n in enumerate(kinds) if n == kinds[a]]
            code.append(("mul", a, draw(st.sampled_from(same))))
            kinds.append(kinds[a])
    return shapes, code, kinds


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(product_bodies(), st.integers(1, 4), st.sampled_from(SCHEDULERS), st.integers(0, 2 ** 16))
def test_random_product_bodies_equal_eager(body_spec, calls, scheduler, seed):
    shapes, code, kinds = body_spec
    rng = rng_for(seed)
    Ws = [params(rng, *s) for s in shapes]
    bs = [params(rng, s[0]) for s in shapes]

    def body(x, y):
        vals = [x, y]
        for ins in code:
            if ins[0] == "prod":
                _, w, a, bias = ins
                vals.append(Ws[w] @ vals[a] + bs[w] if bias else Ws[w] @ vals[a])
            elif ins[0] == "tanh":
                vals.append(la.tanh(vals[ins[1]]))
            else:
                vals.append(vals[ins[1]] * vals[ins[2]])
        outs = [v for v, n in zip(vals[2:], kinds[2:]) if n == H] or [x]
        return la.stack([la.tanh(v) for v in outs]), vals[-1]

    cell = la.cell(body)
    inputs = [(vec(rng), vec(rng)) for _ in range(calls)]
    eager = [body(la.array(x), la.array(y)) for x, y in inputs]
    with la.batching(scheduler=scheduler):
        got = [cell(x, y) for x, y in inputs]
    for g, e in zip(got, eager):
        assert_close(g, e)
    # the same body run again after an in-place update of every weight
    for W in Ws:
        np.asarray(W)[...] *= -1.5
    eager = [body(la.array(x), la.array(y)) for x, y in inputs]
    with la.batching(scheduler=scheduler):
        got = [cell(x, y) for x, y in inputs]
    for g, e in zip(got, eager):
        assert_close(g, e)


def test_tied_parameters_follow_updates_made_through_either_name():
    rng = rng_for(12)
    w = (rng.standard_normal((H, H)) * 0.5).astype(np.float32)
    Wa, tied, Wb = la.parameter(w), la.parameter(w), params(rng, H, H)
    x = vec(rng)
    body = lambda v: la.tanh(Wa @ v) * la.sigmoid(Wb @ v) + la.tanh(tied @ v)  # noqa: E731
    cell = la.cell(body)
    for scale in (1.0, 3.0):
        np.asarray(tied)[...] *= scale
        with la.batching():
            got = cell(x)
        assert_close([got], [body(la.array(x)).asnumpy()])
    assert arranged_steps(plan_of(cell))


# -- weights read transposed by small batches (arrange.weight) -----------------------------------

def _rnn_step(W, b, x, h):
    return la.tanh(W @ la.concatenate([x, h]) + b)


def _rnn_pair(W, b, x, h):
    """Two products of one weight: not merged (one weight), one joined step of 2 members."""
    return la.tanh(W @ la.concatenate([x, h]) + b) * la.sigmoid(W @ la.concatenate([h, x]) + b)


@pytest.mark.parametrize("style", ["ops", "cell", "joined", "merged"])
def test_small_batches_read_a_column_major_weight_made_per_flush(monkeypatch, style):
    """From the ``WARMUP + 1``-th small batch of a flush on, a product ``W @ x`` reads a
    column-major copy of ``W``; the copy lives for one flush, so an in-place update between
    scopes is seen."""
    copies = []
    real = arrange._column_major
    monkeypatch.setattr(arrange, "_column_major", lambda W: copies.append(W.shape) or real(W))
    rng = rng_for(21)
    if style == "merged":
        p, fn = lstm_params(rng), lstm_gates
    else:
        p, fn = Bundle(W=params(rng, H, 2 * H), b=params(rng, H)), (_rnn_pair if style == "joined" else _rnn_step)
    step = fn if style == "ops" else la.cell(fn)
    args = (lambda s: (p, *s)) if style == "merged" else (lambda s: (p.W, p.b, *s))
    zero = la.array(np.zeros(H, np.float32))
    xs = [vec(rng) for _ in range(3)]

    def run(f):
        outs = []
        for x in xs:
            s = (x, zero, zero) if style == "merged" else (x, zero)
            for _ in range(6):
                r = f(*args(s))
                s = (x, *r) if style == "merged" else (x, r)
                outs.append(r[0] if style == "merged" else r)
        return outs

    for update in range(2):
        eager = [np.asarray(o) for o in run(fn)]
        with la.batching() as scope:
            got = run(step)
        assert_close(got, eager)
        assert len(copies) == update + 1 and scope.stats.copied_bytes > 0
    if style == "joined":
        assert any(s.mode == "join" and arrange.reads_weight(s.payload) for s in plan_of(step).steps)
        for W in ([p.W] if style != "merged" else [p.W_i, p.W_u]):
            np.asarray(W)[...] *= -1.5


def test_weight_keeps_single_rows_big_batches_and_column_major_weights_as_they_are():
    from lazyarray.stats import Stats
    W = np.arange(12, dtype=np.float32).reshape(3, 4)
    cache, stats = {}, Stats()
    assert arrange.weight(np, W, arrange.SMALL_BATCH + 1, stats, cache) is W
    assert all(arrange.weight(np, W, 1, stats, cache) is W for _ in range(arrange.WARMUP + 2))
    F = np.asfortranarray(W)
    assert all(arrange.weight(np, F, 1, stats, cache) is F for _ in range(arrange.WARMUP + 2))
    seen = [arrange.weight(np, W, 8, stats, cache) for _ in range(arrange.WARMUP + 2)]
    assert all(s is W for s in seen[:arrange.WARMUP])
    assert seen[-1] is seen[-2] and seen[-1].flags.f_contiguous
    np.testing.assert_array_equal(seen[-1], W)


def test_weight_copies_follow_the_memory_read_not_the_array_object():
    """Views made per batch (weights read in place as rows of one buffer) share one copy; a
    view of other memory never gets it, though Python may give the new view the old one's id."""
    from lazyarray.stats import Stats
    A = np.arange(24, dtype=np.float32).reshape(6, 4)
    B = -A
    cache, stats = {}, Stats()
    for _ in range(arrange.WARMUP + 2):
        for M in (A, B, A[3:]):
            np.testing.assert_array_equal(arrange.weight(np, M[:3], 8, stats, cache), M[:3])
    assert stats.copied_bytes == 3 * A[:3].nbytes  # one copy per distinct block of memory


def test_arranged_bias_of_another_dtype_sees_in_place_updates():
    rng = np.random.default_rng(0)
    Wi, Wf = la.parameter(rng.standard_normal((H, H))), la.parameter(rng.standard_normal((H, H)))  # float64
    bi_np, bf_np = np.zeros(H, np.float32), np.zeros(H, np.float32)                               # float32
    bi, bf = la.parameter(bi_np), la.parameter(bf_np)

    @la.cell
    def gates(x):
        return la.sigmoid(Wi @ x + bi) * la.tanh(Wf @ x + bf)

    xs = [rng.standard_normal(H) for _ in range(4)]

    def batched():
        with la.batching():
            out = [gates(la.array(x)) for x in xs]
        return np.stack([np.asarray(o) for o in out])

    batched()
    bi_np[:] = 5.0                     # parameters are read by reference: update between scopes
    bf_np[:] = -1.0
    eager = np.stack([np.asarray(gates(la.array(x))) for x in xs])
    np.testing.assert_allclose(batched(), eager, rtol=1e-12, atol=1e-12)


def test_arranged_one_row_weights_with_a_stride_of_several_rows():
    # W[0:8:8] is one row (C-contiguous, but its row stride is 8 rows) and W[1:2] the next row in
    # memory: the merged weights were read in place with the first one's strides (rows 0 and 8)
    rng = np.random.default_rng(7)
    H = 6
    W = la.parameter(rng.standard_normal((16, H)).astype(np.float32), name="W")
    with la.batching():
        Wa, Wb = W[0:8:8], W[1:2]       # derived parameters viewing W

    @la.cell
    def two(x):
        return la.concatenate([Wa @ x, Wb @ x])

    xs = [rng.standard_normal(H).astype(np.float32) for _ in range(3)]
    eager = [two(x).asnumpy() for x in xs]
    with la.batching():
        out = [two(x) for x in xs]
    for e, b in zip(eager, _values(out)):
        np.testing.assert_allclose(b, e, rtol=1e-5, atol=1e-5)


def _values(xs):
    return [np.array(x.asnumpy()) for x in xs]
