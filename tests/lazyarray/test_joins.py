"""Joins (stack/concatenate along the first axis) of values that lie interleaved, call after
call, are views of those rows: no copy, the same values as eager, and no write through one
changes the other (numpy's joins copy)."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray import memory
from lazyarray.plancache import PLANS
from lazyarray.workloads import WORKLOADS, trees as tree_models
from lazyarray.workloads.cells import total

H = 4
rng = np.random.default_rng(5)
W = la.parameter(rng.standard_normal((H, 2 * H)).astype(np.float32))


def pairs(n):
    return [(rng.standard_normal(H).astype(np.float32), rng.standard_normal(H).astype(np.float32))
            for _ in range(n)]


def joined(data, join, order=lambda x, y: (x, y)):
    """One tanh batch over every x and y, recorded x0 y0 x1 y1 ... so its rows interleave,
    then a join of each pair (in ``order``)."""
    made = [(la.tanh(x), la.tanh(y)) for x, y in data]
    return made, [join(list(order(x, y))) for x, y in made]


@pytest.mark.parametrize("join", [la.concatenate, la.stack], ids=["concatenate", "stack"])
def test_a_join_of_interleaved_rows_copies_nothing_and_equals_eager(join):
    data = pairs(6)
    eager = [join([np.tanh(x), np.tanh(y)]) for x, y in data]
    with la.batching() as scope:
        _, outs = joined(data, join)
    inputs = 2 * len(data) * H * 4  # stacking the numpy inputs: the only copy
    assert scope.stats.copied_bytes == inputs
    for out, want in zip(outs, eager):
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-6)
    with la.batching() as scope:
        _, outs = joined(data, join, order=lambda x, y: (y, x))  # rows not in join order
    assert scope.stats.copied_bytes == inputs + 2 * len(data) * H * 4
    for out, (x, y) in zip(outs, data):
        np.testing.assert_allclose(out.asnumpy(), join([np.tanh(y), np.tanh(x)]), rtol=1e-6)


def test_a_join_in_place_and_the_values_it_reads_are_read_only():
    """Inside the scope they share memory: read-only. After it each future holds a copy of its
    own (``Scope._finish``), so a write into one cannot reach another."""
    data = pairs(3)
    with la.batching():
        made, outs = joined(data, la.concatenate)
        alias = la.reshape(made[0][0], (2, 2))
        other = la.tanh(data[0][0] * 2)  # same class, not joined: stays writable
        for value in (outs[0], made[0][0], made[2][1], alias):
            array = value.asnumpy()
            with pytest.raises(ValueError, match="read-only"):
                array[0] = 5.0
        other.asnumpy()[0] = 5.0
        assert other.asnumpy()[0] == 5.0
    for value in (made[0][0], alias):
        value.asnumpy()[0] = 7.0
    np.testing.assert_allclose(outs[0].asnumpy(), np.tanh(np.concatenate(data[0])), rtol=1e-6)


def test_values_of_an_earlier_flush_are_joined_by_a_copy_and_stay_writable():
    data = pairs(2)
    with la.batching() as scope:
        made = [(la.tanh(x), la.tanh(y)) for x, y in data]
        first = made[0][0].asnumpy()  # forced: a flush
        outs = [la.concatenate([x, y]) for x, y in made]
        np.testing.assert_allclose(outs[0].asnumpy(), np.tanh(np.concatenate(data[0])), rtol=1e-6)
        first[0] = 5.0  # written after the join ran: numpy's join copied, so must this one
    assert scope.stats.copied_bytes > 0
    np.testing.assert_allclose(outs[0].asnumpy(), np.tanh(np.concatenate(data[0])), rtol=1e-6)


def test_a_cell_reads_its_argument_join_in_place():
    @la.cell
    def step(x, y):
        return la.tanh(W @ la.concatenate([x, y]))

    data = pairs(5)
    eager = [np.tanh(W.asnumpy() @ np.tanh(np.concatenate([x, y]))) for x, y in data]
    copied = {}
    for name, order in (("interleaved", lambda x, y: (x, y)), ("swapped", lambda x, y: (y, x))):
        with la.batching() as scope:
            made = [(la.tanh(x), la.tanh(y)) for x, y in data]
            outs = [step(*order(x, y)) for x, y in made]
        copied[name] = scope.stats.copied_bytes
        if name == "interleaved":
            for out, want in zip(outs, eager):
                np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5)
            made[0][0].asnumpy()[0] = 1.0  # a body's join does not outlive its batch: writable
    assert copied["swapped"] - copied["interleaved"] == 2 * len(data) * H * 4


@pytest.mark.parametrize("memplan", [False, True])
def test_tree_fc_joins_copy_nothing_with_or_without_the_plan(memplan):
    # Cavs' Tree-FC: complete binary trees recorded depth first, so each level's results lie
    # as the next level's pairs; the plan does not ask a join's operands to be contiguous
    # (interleaved rows are not), so it keeps that order
    w = WORKLOADS["treefc"]
    params = w.init(H=H, seed=0).lazy()
    trees = w.data(3, seed=1)
    internal = sum(word == -1 for t in trees for word in t.words)

    def swapped(p, hl, hr):  # the same layer over [h_r; h_l]: no join lies in place
        return la.relu(p.W @ la.concatenate([hr, hl]) + p.b)

    copied = []
    for layer in (tree_models.treefc_internal, swapped):
        def loss():
            return total([tree_models.treefc_root(params, t, internal=layer) for t in trees]).asnumpy()
        eager = loss()
        with la.batching(memplan=memplan) as scope:
            got = loss()
        np.testing.assert_allclose(got, eager, rtol=1e-5)
        copied.append(scope.stats.copied_bytes)
    assert copied[1] - copied[0] == internal * 2 * H * 4


WIDE = 64  # joins of a page or more (MIN_BYTES) are worth reordering a batch for
V = la.parameter(rng.standard_normal((WIDE, 2 * WIDE)).astype(np.float32) / 8)


def scrambled(n, body, memplan):
    """``n`` calls of ``body(x, y)`` over one tanh batch made in a random order (as ED-Batch's
    Table 2 feeds its cells), so no join's values lie interleaved by themselves."""
    flat = [rng.standard_normal(WIDE).astype(np.float32) for _ in range(2 * n)]
    with la.batching(memplan=memplan) as scope:
        made = {}
        for j in np.random.default_rng(1).permutation(len(flat)).tolist():
            made[j] = la.tanh(flat[j])
        outs = [body(made[2 * i], made[2 * i + 1]) for i in range(n)]
    for i, out in enumerate(outs):
        want = body(la.tanh(flat[2 * i]), la.tanh(flat[2 * i + 1])).asnumpy()
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-6)
    return scope.stats.copied_bytes


def test_the_plan_orders_a_batch_so_that_a_join_of_its_values_is_a_view():
    def body(x, y):
        return V @ la.concatenate([x, y])

    inputs = join = 2 * 8 * WIDE * 4  # the tanh batch's stacked inputs; the join's rows
    assert scrambled(8, body, memplan=False) == inputs + join
    assert scrambled(8, body, memplan=True) == inputs


def test_the_plan_keeps_an_order_that_more_operands_read_as_views():
    def body(x, y):  # x * y and x + y read x's and y's as two blocks: 4 operands of 8 values
        return V @ la.concatenate([x, y]) + la.concatenate([x * y, x + y])[:WIDE]

    inputs = join = 2 * 8 * WIDE * 4
    # interleaving x's and y's for the first join would gather all four; the second join's
    # values (x * y, x + y) come from two batches, so it is gathered either way
    assert scrambled(8, body, memplan=True) == inputs + 2 * join


def test_a_stack_and_a_concatenate_of_the_same_rows_keep_their_shapes():
    xs = [rng.standard_normal(3).astype(np.float32) for _ in range(4)]
    with la.batching():
        t = [la.tanh(x) for x in xs]
        stacked = [la.stack([t[0], t[1]]), la.stack([t[2], t[3]])]
        joined = [la.concatenate([t[0], t[1]]), la.concatenate([t[2], t[3]])]
    for i in range(2):
        pair = [np.tanh(xs[2 * i]), np.tanh(xs[2 * i + 1])]
        np.testing.assert_allclose(stacked[i].asnumpy(), np.stack(pair), rtol=1e-6)
        np.testing.assert_allclose(joined[i].asnumpy(), np.concatenate(pair), rtol=1e-6)


def test_a_cell_body_stack_and_concatenate_of_the_same_rows_keep_their_shapes():
    @la.cell
    def flat(x, y):
        return la.tanh(la.concatenate([x, y]))

    @la.cell
    def rows(x, y):
        return la.tanh(la.stack([x, y]))

    xs = [rng.standard_normal(3).astype(np.float32) for _ in range(4)]
    with la.batching():
        t = [la.tanh(x) for x in xs]
        a = [flat(t[0], t[1]), flat(t[2], t[3])]
        b = [rows(t[0], t[1]), rows(t[2], t[3])]
    for i in range(2):
        pair = [np.tanh(xs[2 * i]), np.tanh(xs[2 * i + 1])]
        np.testing.assert_allclose(a[i].asnumpy(), np.tanh(np.concatenate(pair)), rtol=1e-6)
        np.testing.assert_allclose(b[i].asnumpy(), np.tanh(np.stack(pair)), rtol=1e-6)


def test_a_join_of_aliases_of_an_earlier_flush_copies():
    xs = [rng.standard_normal(4).astype(np.float32) for _ in range(4)]
    want = np.concatenate([np.tanh(xs[0]).reshape(2, 2), np.tanh(xs[1]).reshape(2, 2)])
    with la.batching():
        t = [la.tanh(x) for x in xs]
        first = t[0].asnumpy()  # forced, writable: a flush
        a = [la.reshape(v, (2, 2)) for v in t]
        joined = la.concatenate([a[0], a[1]]), la.concatenate([a[2], a[3]])
        np.testing.assert_allclose(joined[0].asnumpy(), want, rtol=1e-6)
        first[0] = 5.0  # numpy's join copied: must not show through
    np.testing.assert_allclose(joined[0].asnumpy(), want, rtol=1e-6)


def test_a_join_of_split_parts_of_an_earlier_flush_copies():
    xs = [rng.standard_normal(4).astype(np.float32) for _ in range(2)]
    want = np.stack([np.tanh(xs[0])[:2], np.tanh(xs[1])[:2]])
    with la.batching():
        t = [la.tanh(x) for x in xs]
        first = t[0].asnumpy()
        parts = [la.split(v, 2)[0] for v in t]
        joined = la.stack(parts)
        np.testing.assert_allclose(joined.asnumpy(), want, rtol=1e-6)
        first[0] = 5.0
    np.testing.assert_allclose(joined.asnumpy(), want, rtol=1e-6)


def test_the_parts_a_join_of_other_parts_does_not_read_stay_writable():
    xs = [rng.standard_normal(8).astype(np.float32) for _ in range(4)]
    with la.batching():
        parts = [la.split(la.tanh(x), 2) for x in xs]
        joined = [la.stack([parts[0][0], parts[1][0]]), la.stack([parts[2][0], parts[3][0]])]
        other = parts[0][1].asnumpy()  # its bytes lie between the joined rows, none of them joined
        other[0] = 5.0
        assert parts[0][1].asnumpy()[0] == 5.0
        np.testing.assert_allclose(joined[0].asnumpy(), np.stack([np.tanh(xs[0])[:4], np.tanh(xs[1])[:4]]),
                                   rtol=1e-6)
        assert not parts[0][0].asnumpy().flags.writeable


KIB = 256  # 1 KiB a value: the two-call joins below reach _Interleaver.MIN_BYTES


@la.cell
def joined_tanh(x, y):
    return la.tanh(la.concatenate([x, y]))


def copies_of_a_join_and_a_cell_join(monkeypatch, interleave):
    """One tanh batch made in a scrambled order; a two-call join (v3, v7), (v2, v0) of its
    values; a cell joining (v1, v4), (v5, v2), (v4, v0) in its body."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(KIB).astype(np.float32) for _ in range(8)]
    PLANS.clear()  # a plan made the other way would replay
    with monkeypatch.context() as patch:
        if not interleave:
            patch.setattr(memory._Interleaver, "run", lambda self: None)
        with la.batching(memplan=True) as scope:
            made = {}
            for j in (1, 5, 7, 4, 2, 3, 6, 0):
                made[j] = la.tanh(xs[j])
            joins = [la.concatenate([made[3], made[7]]), la.concatenate([made[2], made[0]])]
            cells = [joined_tanh(made[4], made[0]), joined_tanh(made[5], made[2]), joined_tanh(made[1], made[4])]
    PLANS.clear()
    t = [np.tanh(x) for x in xs]
    for got, (a, b) in zip(joins, [(3, 7), (2, 0)]):
        np.testing.assert_array_equal(got.asnumpy(), np.concatenate([t[a], t[b]]))
    for got, (a, b) in zip(cells, [(4, 0), (5, 2), (1, 4)]):
        np.testing.assert_allclose(got.asnumpy(), np.tanh(np.concatenate([t[a], t[b]])), rtol=1e-6)
    return scope.stats.copied_bytes


def test_the_interleaver_counts_a_cell_body_join_gathered_whole(monkeypatch):
    # interleaving (v3, v7, v2, v0) makes the join a view (4 values) but the cell's second
    # arguments no longer a view: its body's join of both is then gathered whole (6 values),
    # while the estimate counted the first arguments, still a view, as saved
    planned = copies_of_a_join_and_a_cell_join(monkeypatch, interleave=True)
    assert planned <= copies_of_a_join_and_a_cell_join(monkeypatch, interleave=False)


def copies_of_a_join_read_with_another_value(monkeypatch, interleave):
    """tanh of x1 then of x0 (one batch), their join [t0; t1], and one product batch over the
    join and another value of the join's class."""
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(KIB) for _ in range(2)]
    other = rng.standard_normal(2 * KIB)
    PLANS.clear()
    with monkeypatch.context() as patch:
        if not interleave:
            patch.setattr(memory._Interleaver, "run", lambda self: None)
        with la.batching(memplan=True) as scope:
            t1, t0 = la.tanh(xs[1]), la.tanh(xs[0])
            joined = la.concatenate([t0, t1])
            halves = [joined * 0.5, la.tanh(other) * 0.5]
    PLANS.clear()
    np.testing.assert_array_equal(halves[0].asnumpy(), np.concatenate([np.tanh(xs[0]), np.tanh(xs[1])]) * 0.5)
    np.testing.assert_array_equal(halves[1].asnumpy(), np.tanh(other) * 0.5)
    return scope.stats.copied_bytes


def test_the_interleaver_counts_the_readers_of_a_join_it_makes_a_view(monkeypatch):
    # the join in place is a base of its own: the product batch, which read it and the other
    # value as one block of the arena, then gathers them (the estimate read them in the arena)
    planned = copies_of_a_join_read_with_another_value(monkeypatch, interleave=True)
    assert planned <= copies_of_a_join_read_with_another_value(monkeypatch, interleave=False)


def copies_of_a_join_of_products_of_an_earlier_flush(monkeypatch, interleave):
    """Products of two batches of an earlier flush (forced mid-scope), read in place in that
    flush's order, then joins [v1; v0], [v3; v2] of the products."""
    xs = [np.random.default_rng(i).standard_normal(KIB).astype(np.float32) for i in range(4)]
    PLANS.clear()
    with monkeypatch.context() as patch:
        if not interleave:
            patch.setattr(memory._Interleaver, "run", lambda self: None)
        with la.batching(memplan=True) as scope:
            u, w = [la.tanh(x) for x in xs], [la.sigmoid(x) for x in xs]
            u[0].asnumpy()  # a flush
            v = [a * b for a, b in zip(u, w)]
            joins = [la.concatenate([v[1], v[0]]), la.concatenate([v[3], v[2]])]
    PLANS.clear()
    want = [np.tanh(x) * (1 / (1 + np.exp(-x))) for x in xs]
    for got, (a, b) in zip(joins, [(1, 0), (3, 2)]):
        np.testing.assert_allclose(got.asnumpy(), np.concatenate([want[a], want[b]]), rtol=1e-6)
    return scope.stats.copied_bytes


def test_the_interleaver_keeps_the_order_of_a_batch_reading_an_earlier_flush(monkeypatch):
    # interleaving the products for the joins (4 values) gathers both of their operands (8
    # values), read in place before; the estimate took values of an earlier flush for gathered
    planned = copies_of_a_join_of_products_of_an_earlier_flush(monkeypatch, interleave=True)
    assert planned <= copies_of_a_join_of_products_of_an_earlier_flush(monkeypatch, interleave=False)


def test_the_interleaver_takes_an_alias_for_no_cost():
    # slices of the batch's values, taken in its own order, read them in place whatever their
    # rows (an alias is a view of its operand's base): counting them as lost when the batch is
    # reordered for the join cancelled the join's gain
    def run(memplan):
        flat = [np.random.default_rng(j).standard_normal(WIDE).astype(np.float32) for j in range(16)]
        order = np.random.default_rng(1).permutation(16).tolist()
        with la.batching(memplan=memplan) as scope:
            made = {}
            for j in order:
                made[j] = la.tanh(flat[j])
            heads = [made[j][:WIDE // 2] for j in order]
            joins = [la.concatenate([made[2 * i], made[2 * i + 1]]) for i in range(8)]
        for i, joined in enumerate(joins):
            np.testing.assert_allclose(joined.asnumpy(), np.tanh(np.concatenate(flat[2 * i:2 * i + 2])), rtol=1e-6)
        for j, head in zip(order, heads):
            np.testing.assert_allclose(head.asnumpy(), np.tanh(flat[j])[:WIDE // 2], rtol=1e-6)
        return scope.stats.copied_bytes

    inputs = join = 16 * WIDE * 4
    assert run(memplan=False) == inputs + join
    assert run(memplan=True) == inputs


@pytest.mark.parametrize("scalar", [np.float32(2.0), 0.0, 3, np.float64(-0.0)], ids=["f32", "float", "int", "f64"])
def test_a_scalar_in_a_stack_is_an_item_like_the_others_and_poisons_no_later_scope(scalar):
    """A scalar among a stack's items was made an input node but laid out as a constant: the
    signature read the wrong slots (its value frozen in, the next item reading the scalar), and
    the entry, process-wide, made later stacks of the same classes wrong too."""
    eager = la.stack([la.tanh(np.float32(1.0)), scalar, la.tanh(np.float32(1.0)) * 2]).asnumpy()
    with la.batching():
        c = la.tanh(np.float32(1.0))
        got = la.stack([c, scalar, c * 2])
    np.testing.assert_allclose(got.asnumpy(), eager, rtol=1e-6)
    assert got.dtype == eager.dtype
    with la.batching():     # the same classes, no scalar: must not find a poisoned entry
        a, b = la.array(np.float32(5.0)), la.array(np.float32(7.0))
        later = la.stack([a, b, a])
    np.testing.assert_array_equal(later.asnumpy(), [5, 7, 5])
