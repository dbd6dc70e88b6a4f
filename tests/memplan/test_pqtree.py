"""PQTree against brute force: the orders a tree admits are exactly those keeping every
accepted subset consecutive, and a refused subset leaves the tree as it was."""

import itertools
from math import factorial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memplan import PQTree
from memplan.pqtree import LEAF, PNODE, children

_POSITIONS = {}


def positions(n):
    """Every permutation of 0..n-1 as a row of positions: pos[r, v] = place of v."""
    if n not in _POSITIONS:
        perms = np.array(list(itertools.permutations(range(n))), dtype=np.int8).reshape(-1, n)
        pos = np.empty_like(perms)
        pos[np.arange(len(perms))[:, None], perms] = np.arange(n, dtype=np.int8)
        _POSITIONS[n] = pos
    return _POSITIONS[n]


def keeps(pos, subset):
    """Which rows of `pos` keep `subset` consecutive."""
    s = sorted(set(subset))
    if len(s) <= 1:
        return np.ones(len(pos), dtype=bool)
    p = pos[:, s]
    return p.max(axis=1) - p.min(axis=1) == len(s) - 1


def tree_orders(tree):
    """Every order the tree admits, read off its structure."""
    def orders(x):
        if x.kind == LEAF:
            return [(x.leaf,)]
        kids = [orders(c) for c in children(x)]
        arrangements = itertools.permutations(kids) if x.kind == PNODE else (kids, kids[::-1])
        out = []
        for arrangement in arrangements:
            for parts in itertools.product(*arrangement):
                out.append(sum(parts, ()))
        return out
    return set(orders(tree.root)) if tree.root is not None else {()}


def as_orders(pos, rows):
    """The permutations (as tuples of leaves) of the selected rows."""
    return {tuple(np.argsort(r)) for r in pos[rows]}


def consecutive(order, subset):
    s = set(subset)
    if len(s) <= 1:
        return True
    where = [i for i, v in enumerate(order) if v in s]
    return where[-1] - where[0] == len(s) - 1


families = st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.one_of(
        st.lists(st.integers(0, n - 1), max_size=n),                # anything
        st.integers(0, n - 1).flatmap(                              # an interval of a hidden order
            lambda a: st.integers(a, n - 1).map(lambda b: list(range(a, b + 1)))),
    ), max_size=10),
    st.permutations(range(n)),
))


@settings(max_examples=150, deadline=None)
@given(families)
def test_reduce_matches_brute_force(family):
    n, subsets, relabel = family
    pos = positions(n)
    tree = PQTree(n)
    admitted = np.ones(len(pos), dtype=bool)
    accepted = []
    for subset in subsets:
        subset = [relabel[v] for v in subset]       # intervals of a hidden order, mixed up
        possible = admitted & keeps(pos, subset)
        feasible = bool(possible.any())
        before = (tree.frontier(), tree.count(), None if feasible else tree_orders(tree))
        ok = tree.reduce(subset)
        assert ok == feasible
        if ok:
            admitted = possible
            accepted.append(subset)
        else:
            assert (tree.frontier(), tree.count(), tree_orders(tree)) == before
        assert tree.count() == int(admitted.sum())
        front = tree.frontier()
        assert sorted(front) == list(range(n))
        assert all(consecutive(front, s) for s in accepted)
    assert tree_orders(tree) == as_orders(pos, admitted)


def test_trivial_subsets_change_nothing():
    tree = PQTree(5)
    for subset in ([], [3], [2, 2], range(5), [4, 3, 2, 1, 0, 0]):
        assert tree.reduce(subset)
        assert tree.count() == factorial(5)


def test_small_trees():
    assert PQTree(0).frontier() == [] and PQTree(0).count() == 1 and PQTree(0).reduce([])
    one = PQTree(1)
    assert one.frontier() == [0] and one.count() == 1 and one.reduce([0])
    two = PQTree(2)
    assert two.count() == 2 and two.reduce([1, 0]) and two.count() == 2


def test_counts_p_and_q_nodes():
    tree = PQTree(6)
    assert tree.reduce([0, 1]) and tree.reduce([1, 2]) and tree.reduce([2, 3])
    # Q(0, 1, 2, 3) inside P(Q, 4, 5): 2 directions x 3! arrangements
    assert tree.count() == 2 * 6
    assert tree.reduce([4, 5])
    assert tree.count() == 2 * 2 * 2
    assert not tree.reduce([0, 2])
    assert tree.count() == 8


def test_refused_subset_in_the_middle_of_a_chain():
    tree = PQTree(7)
    for pair in ([0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6]):
        assert tree.reduce(pair)
    front = tree.frontier()
    for bad in ([0, 2], [1, 3, 5], [0, 6], [2, 4, 6]):
        assert not tree.reduce(bad)
        assert tree.frontier() == front and tree.count() == 2
    assert tree.reduce([2, 3, 4]) and tree.count() == 2


def test_bad_leaves_are_errors():
    tree = PQTree(3)
    with pytest.raises(ValueError):
        tree.reduce([0, 3])
    with pytest.raises(ValueError):
        tree.reduce([-1, 0])
    with pytest.raises(TypeError, match="integer"):
        tree.reduce([0.0, 1.0])
    with pytest.raises(ValueError):
        PQTree(-1)
    assert tree.count() == 6             # nothing was applied


def test_many_leaves_stay_consistent():
    """Intervals of a hidden order on a larger tree: every reduce succeeds, the frontier keeps
    them all, and the tree still admits the hidden order."""
    rng = np.random.default_rng(7)
    n = 400
    hidden = rng.permutation(n)
    tree = PQTree(n)
    intervals = []
    for _ in range(300):
        a = int(rng.integers(0, n - 1))
        b = int(rng.integers(a + 1, min(n, a + 40)))
        s = hidden[a:b + 1].tolist()
        assert tree.reduce(s)
        intervals.append(s)
    front = tree.frontier()
    assert sorted(front) == list(range(n))
    assert all(consecutive(front, s) for s in intervals)
    for s in intervals[:50]:       # everything accepted is now implied: nothing changes
        count = tree.count()
        assert tree.reduce(s) and tree.count() == count


def maximal_nodes(tree, subset):
    """The largest nodes wholly inside `subset` (as the layout hands them to a reduce)."""
    inside = set(subset)
    out = []

    def walk(x):
        if x.kind == LEAF:
            return x.leaf in inside
        kids = list(children(x))
        flags = [walk(c) for c in kids]
        if all(flags):
            return True
        out.extend(c for c, f in zip(kids, flags) if f)
        return False

    if walk(tree.root):
        out.append(tree.root)
    for x in out:
        leaf = x
        while leaf.kind != LEAF:
            leaf = leaf.end0
        x.rep = leaf.leaf
    return out


@settings(max_examples=100, deadline=None)
@given(families)
def test_reduce_by_whole_subtrees_equals_reduce_by_leaves(family):
    n, subsets, relabel = family
    by_leaves, by_nodes = PQTree(n), PQTree(n)
    for subset in subsets:
        subset = sorted({relabel[v] for v in subset})
        ok = by_leaves.reduce(subset)
        assert (by_nodes._reduce(maximal_nodes(by_nodes, subset)) is not None) == ok
        assert tree_orders(by_leaves) == tree_orders(by_nodes)
