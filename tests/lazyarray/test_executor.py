"""Compiled flushes: a scope whose structure was seen before replays the cached program on its
own data; every replay equals eager, including flushes that read earlier flushes' values."""
import threading

import numpy as np
import pytest

import lazyarray as la
from lazyarray.plancache import PLANS

rng = np.random.default_rng(11)
H = 4


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


E = la.parameter(f32(9, H), name="E")
W = la.parameter(f32(2 * H, H), name="W")
U = la.parameter(f32(H, 2 * H), name="U")


def tree(t):
    """Op-level: split, concatenate, an affine, an embedding lookup by word id."""
    if isinstance(t, int):
        return la.tanh(E[t])
    left, right = tree(t[0]), tree(t[1])
    a, g = la.split(W @ left + 1.0, 2)
    return la.tanh(U @ la.concatenate([a * right, g])) - left


@la.cell
def node(left, right):
    a, g = la.split(W @ left + 1.0, 2)
    return la.tanh(U @ la.concatenate([a * right, g])) - left


def tree_cells(t):
    if isinstance(t, int):
        return la.tanh(E[t])
    return node(tree_cells(t[0]), tree_cells(t[1]))


FOREST = [((1, 2), 3), (4, (5, (6, 7))), 8, ((0, 1), (2, 3))]
RELABELLED = [((7, 0), 2), (3, (8, (1, 1))), 4, ((5, 6), (0, 2))]  # same shapes, other words


def _close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(la.asnumpy(g), la.asnumpy(w), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scheduler", ["depth", "agenda"])
@pytest.mark.parametrize("memplan", [False, True])
@pytest.mark.parametrize("encode", [tree, tree_cells])
def test_a_replayed_scope_computes_its_own_data(scheduler, memplan, encode):
    PLANS.clear()
    for forest, hits in ((FOREST, 0), (RELABELLED, 1), (FOREST, 1)):
        with la.batching(scheduler=scheduler, memplan=memplan) as scope:
            got = [encode(t) for t in forest]
        _close(got, [encode(t) for t in forest])
        assert (scope.stats.cache_hits, scope.stats.cache_misses) == (hits, 1 - hits)


def test_output_parts_are_part_of_the_structure():
    """Same signatures and edges, another output of the split: another program."""
    PLANS.clear()
    xs = [f32(2 * H) for _ in range(3)]
    for part, hits in ((0, 0), (1, 0), (0, 1), (1, 1)):
        with la.batching() as scope:
            got = [la.tanh(la.split(x * 2.0, 2)[part]) for x in xs]
        _close(got, [np.tanh(np.split(x * 2.0, 2)[part]) for x in xs])
        assert scope.stats.cache_hits == hits


def _two_flushes(xs, extra):
    """The second flush reads the first's values, directly and through a reshape alias; with
    ``extra`` the first flush has one more arena, so the second's own memory is numbered
    differently although its structure is the same."""
    hs = [la.tanh(W @ x) for x in xs]
    more = [la.concatenate([h, h]) for h in hs[:extra]]
    if float(la.sum(hs[0])) < -1e9:  # value-dependent control flow (never taken: one structure)
        hs.reverse()
    return more + [la.reshape(h, (2, H)).sum(axis=0) * 0.5 + la.split(h, 2)[1] for h in hs]


@pytest.mark.parametrize("scheduler", ["depth", "agenda"])
@pytest.mark.parametrize("memplan", [False, True])
def test_flushes_that_read_earlier_flushes_replay_correctly(scheduler, memplan):
    PLANS.clear()
    hits = []
    for extra in (0, 1, 0, 1):
        xs = [f32(H) for _ in range(4)]
        with la.batching(scheduler=scheduler, memplan=memplan) as scope:
            got = _two_flushes(xs, extra)
        _close(got, _two_flushes([la.array(x) for x in xs], extra))
        assert scope.stats.flushes == 1
        hits.append(scope.stats.cache_hits)
    assert hits == [0, 1, 2, 2]


def test_values_forced_after_a_replayed_scope():
    """Futures of a replayed scope resolve after it, parts included."""
    PLANS.clear()
    for _ in range(2):
        xs = [f32(2 * H) for _ in range(3)]
        with la.batching():
            parts = [la.split(la.tanh(x), 2) for x in xs]
        for (a, b), x in zip(parts, xs):
            np.testing.assert_allclose(a.asnumpy(), np.tanh(x[:H]), rtol=1e-6)
            np.testing.assert_allclose(b.asnumpy(), np.tanh(x[H:]), rtol=1e-6)


def test_an_alias_that_copies_is_not_used_as_a_view():
    """Reshaping ops run no kernel: their value is a view of the base their operands live in,
    made once when the flush is compiled. A view made of a copy would hold the base as it was
    then, before the operands were written; such a "view" is refused and the op runs instead."""
    from ops_registry import REGISTRY
    op = REGISTRY["transpose"]
    alias = op.alias
    object.__setattr__(op, "alias", lambda xp, base, **attrs: alias(xp, base, **attrs).copy())
    try:
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        W = la.parameter(np.eye(3, dtype=np.float32))
        with la.batching():
            got = [la.transpose(la.array(a) @ W + i) for i in range(3)]
        for i, g in enumerate(got):
            np.testing.assert_array_equal(g.asnumpy(), (a + i).T)
    finally:
        object.__setattr__(op, "alias", alias)


@pytest.mark.parametrize("memplan", [False, True])
def test_a_split_part_of_an_empty_value_is_that_part(memplan):
    # an empty view shares no memory with its base (np.may_share_memory is False), so the part
    # was taken for a copy and refused: its base id -1 read the flush's last base instead
    with la.batching(memplan=memplan):
        part = la.split(la.tanh(np.zeros(0, np.float32)), 2)[1]
        joined = la.stack([part, part])
        other = la.tanh(np.zeros((2, 3)))
    assert la.asnumpy(part).shape == (0,) and la.asnumpy(part).dtype == np.float32
    assert la.asnumpy(joined).shape == (2, 0)
    assert la.asnumpy(other).shape == (2, 3)


def test_gather_buffers_are_sized_by_their_own_class():
    """A gather buffer took as many rows as the flush's largest batch of any class: one batch of
    100,000 scalars and a gather of two 400 kB values asked for 37 GiB."""
    from lazyarray.executor import _buffers
    rng = np.random.default_rng(0)
    big = [rng.standard_normal((1000, 100)).astype(np.float32) for _ in range(4)]
    kept = {}

    def run():
        with la.batching():
            [la.tanh(la.array(np.float32(i))) for i in range(100_000)]
            a0, b0, a1, b1 = (la.tanh(la.array(v)) for v in big)     # rows a0 b0 a1 b1: a gather
            p = [a0 * b0, a1 * b1]
        kept["bytes"] = sum(v.nbytes for v in _buffers.pool.values())
        kept["value"] = p[1].asnumpy()

    thread = threading.Thread(target=run)   # a fresh thread: a pool of its own
    thread.start()
    thread.join()
    np.testing.assert_allclose(kept["value"], np.tanh(big[2]) * np.tanh(big[3]), rtol=1e-5)
    assert kept["bytes"] < 10 * big[0].nbytes


PAD = la.parameter(f32(H), name="PAD")


def _joins(xs):
    """Stacks and concatenates of values of earlier flushes (a value forced after each step),
    of split parts and of a shared parameter: per item of a batch, its rows lie in one base of
    an earlier flush in order, out of order, or in a base per row. The executor writes each
    item straight into place (``Executor._run_join``)."""
    n = len(xs)
    first = [la.tanh(U @ la.tanh(W @ x)) for x in xs]     # one flush: rows 0..n-1 of one base
    float(la.sum(first[0]))
    hs, parts = [], []
    for x in xs:                                      # then a flush per value: a base each
        h = la.tanh(U @ la.concatenate([x, x]))
        parts.append(la.split(h * 2.0, 2)[1])
        float(la.sum(h))
        hs.append(h)
    local = [la.tanh(x * 3.0) for x in xs]          # of this flush: in order or not, and in
    halves = [la.split(la.tanh(x * 3.0 + 1.0), 2)[0] if i % 2 else la.tanh(x[:H // 2])  # two bases
              for i, x in enumerate(xs)]
    return ([la.stack([first[i], hs[i], first[n - 1 - i], PAD]) for i in range(n)]
            + [la.concatenate([PAD, hs[n - 1 - i], first[i]]) for i in range(n)]
            + [la.stack([parts[i], parts[0], parts[n - 1 - i]]) for i in range(n)]
            + [la.stack([local[i], local[n - 1 - i], PAD]) for i in range(n)]
            + [la.stack([halves[i], parts[i]]) for i in range(n)])


@pytest.mark.parametrize("scheduler", ["depth", "agenda"])
def test_joins_of_earlier_flushes_values_equal_eager_with_gradients(scheduler):
    xs = [f32(H) for _ in range(4)]
    weights = {(4, H): f32(4, H), (3 * H,): f32(3 * H), (3, H // 2): f32(3, H // 2), (3, H): f32(3, H),
               (2, H // 2): f32(2, H // 2)}

    def loss(outs):
        return la.sum(la.stack([la.sum(o * weights[o.shape]) for o in outs]))

    want = _joins([la.array(x) for x in xs])
    loss(want).backward()
    grads = [p.grad.copy() for p in (W, U, PAD)]
    W.grad = U.grad = PAD.grad = None
    for _ in range(2):  # the second scope replays the first one's programs
        with la.batching(scheduler=scheduler) as scope:
            got = _joins(xs)
            loss(got).backward()
        _close(got, want)
        for p, g in zip((W, U, PAD), grads):
            np.testing.assert_allclose(p.grad, g, rtol=1e-4, atol=1e-5)
            p.grad = None
    assert "stack" in scope.explain() and "concatenate" in scope.explain()


PAD2 = la.parameter(f32(2 * H), name="PAD2")


def _late_joins(xs, calls):
    """Joins of values of earlier flushes, with a shared parameter among them: items in one base
    (an encoder's vectors, or the second parts of its split), the parameter between them or not;
    and items each in its own base (a value forced per step, as a parser's loss terms), in
    batches of ``calls`` joins."""
    n = len(xs)
    first = [la.tanh(W @ x) for x in xs]       # one flush: one base for all (and one per split part)
    parts = [la.split(f * 3.0, 2)[1] for f in first]
    float(la.sum(first[0]))
    steps, sums = [], []
    for x in xs:                                # then a flush per value: a base each
        steps.append(la.tanh(x * 2.0))
        sums.append(la.sum(steps[-1]))
        float(sums[-1])
    pick = lambda i, k: (i * 3 + k) % n     # noqa: E731
    return ([la.concatenate([first[pick(i, 1)], first[pick(i, 2)], PAD2, first[i]]) for i in range(calls)]
            + [la.stack([PAD2, first[pick(i, 1)], first[i]]) for i in range(calls)]
            + [la.concatenate([parts[pick(i, 2)], PAD, parts[i]]) for i in range(calls)]
            + [la.stack(steps[i:] + steps[:i]) for i in range(calls)]
            + [la.stack(sums[i:] + sums[:i]) for i in range(calls)])


@pytest.mark.parametrize("calls", [1, 2, 6])
def test_joins_of_earlier_flushes_gather_all_at_once_and_equal_eager(calls, monkeypatch):
    """Items of earlier flushes that share a base are gathered in one step; items in a base each
    go column by column, or value by value in short columns (``Executor._put_late``)."""
    from lazyarray.executor import Executor
    xs = [f32(H) for _ in range(8)]
    want = _late_joins([la.array(x) for x in xs], calls)
    seen = []
    put_late = Executor._put_late
    monkeypatch.setattr(Executor, "_put_late", lambda self, target, *a: seen.append(len(target)) or
                        put_late(self, target, *a))
    with la.batching():
        got = _late_joins(xs, calls)
    _close(got, want)
    assert seen == [calls, calls]   # the stacks of values in a base each


def test_signatures_compiled_again_at_other_sizes_equal_eager():
    """A map flush's signatures recur in batch sizes that do not: each flush compiles from what
    was worked out on a signature's first batch (``Payload.form``, kept per signature), joins
    of a shared parameter and of values of this flush and of earlier ones included."""
    from lazyarray.scope import SIGNATURES
    forms = {}
    for n in (3, 5, 2):
        xs = [f32(H) for _ in range(n)]
        want = _joins([la.array(x) for x in xs])
        with la.batching() as scope:
            got = _joins(xs)
        _close(got, want)
        assert scope.stats.cache_misses
        for sig, payload in enumerate(SIGNATURES.table.payload):
            if payload is not None and payload.form is not None:
                assert forms.setdefault(sig, payload.form) is payload.form
    assert len(forms) >= 5


@la.cell
def mixed_reads(a, b, c, d):
    return la.tanh(U @ la.concatenate([a, b])) * c + d


@pytest.mark.parametrize("scheduler", ["depth", "agenda"])
def test_one_batch_reading_arguments_located_every_way_equals_eager_with_gradients(scheduler, monkeypatch):
    """``Executor._stacked`` locates a batch's arguments all at once; in one batch of calls
    they lie every way an argument can: consecutive rows of one base (a slice), rows of one
    base out of order (a take), the same row again and again (a scatter of repeated rows
    backward), rows of two bases (mixed), values of an earlier flush (looked up per run)."""
    from lazyarray.executor import _DYNAMIC, _MIXED, _SLICE, _TAKE, Executor
    P = la.parameter(f32(6, H), name="P")
    kinds, located = set(), Executor._stacked

    def stacked(self, *args):
        out = located(self, *args)
        kinds.update(r[0] for r in out)
        return out

    monkeypatch.setattr(Executor, "_stacked", stacked)

    def outputs():
        early = [la.exp(P[i]) for i in range(6)]
        la.asnumpy(early[0])    # a flush: early values are an earlier flush's in a scope
        first = [la.tanh(P[i]) for i in range(6)]
        second = [la.split(la.sigmoid(la.concatenate([P[i], P[5 - i]])), 2)[1] for i in range(6)]   # another base
        out = [mixed_reads(first[i], first[5 - i], (first if i % 2 else second)[i], early[i]) for i in range(6)]
        out += [mixed_reads(first[i], second[5 - i], first[0], early[5 - i]) for i in range(6)]
        return out

    def loss(outs):
        return la.sum(la.stack([la.sum(o * (k + 1)) for k, o in enumerate(outs)]))

    want = outputs()
    loss(want).backward()
    grads = [np.array(p.grad) for p in (P, U)]
    P.grad = U.grad = None
    PLANS.clear()
    for _ in range(2):      # compiled, then replayed
        with la.batching(scheduler=scheduler) as scope:
            got = outputs()
            loss(got).backward()
        _close(got, want)
        for p, g in zip((P, U), grads):
            np.testing.assert_allclose(p.grad, g, rtol=1e-4, atol=1e-5)
            p.grad = None
    assert {_SLICE, _TAKE, _MIXED, _DYNAMIC} <= kinds
    assert scope.stats.cache_hits
