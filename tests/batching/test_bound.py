"""Lower bounds on batches: ED-Batch's A.3 and ``path_bound``, against the optimum found by
brute force on small graphs."""
from hypothesis import given, settings, strategies as st

from batching import lower_bound, path_bound
from batching.bound import _longest_supersequence
from batching.synthetic import Builder


def optimum(view) -> int:
    """The fewest batches of any schedule, breadth first over the sets of executed nodes (a
    batch of type t may as well take every ready t-node)."""
    deps = [set(view.indices[view.indptr[v]:view.indptr[v + 1]].tolist()) for v in range(len(view))]
    types = view.types.tolist()
    level, batches = {frozenset()}, 0
    while frozenset(range(len(view))) not in level:
        following = set()
        for done in level:
            ready = [v for v in range(len(view)) if v not in done and deps[v] <= done]
            for t in {types[v] for v in ready}:
                following.add(done | {v for v in ready if types[v] == t})
        level, batches = following, batches + 1
    return batches


def chains(b: Builder, orders: list[str]) -> None:
    """Per string, a chain whose letters name the affine types, each followed by a split."""
    for order in orders:
        last = b.node("x")
        for letter in order:
            last = b.node("s", (b.node(letter, (last,)),))


@st.composite
def alternating(draw):
    """Chains of two alternating weights (TreeLSTM-2Type's pattern), some joined by an extra
    edge into a later node of another chain."""
    b = Builder()
    orders = draw(st.lists(st.text("ab", min_size=2, max_size=6), min_size=2, max_size=3))
    chains(b, orders)
    n = len(b.graph.sig)
    for _ in range(draw(st.integers(0, 2))):
        u, v = sorted(draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True)))
        b.graph.ins.append(u << 16)
        b.graph.sig.append(b.table.intern(("join", v), 2, 0, False, "join", None))
        b.graph.depth.append(1 + max(b.graph.depth[u], b.graph.depth[v]))
        b.graph.ins.append(v << 16)
    return b.graph.view()


@st.composite
def dags(draw):
    b = Builder()
    for v in range(draw(st.integers(1, 12))):
        k = draw(st.integers(0, min(2, v)))
        inputs = tuple(draw(st.lists(st.integers(0, v - 1), min_size=k, max_size=k, unique=True))) if k else ()
        b.node(f"t{draw(st.integers(0, 2))}/{k}", inputs)
    return b.graph.view()


@settings(max_examples=120, deadline=None)
@given(st.one_of(alternating(), dags()))
def test_bounds_never_pass_the_optimum(view):
    assert lower_bound(view) <= path_bound(view) <= optimum(view)


def test_alternating_weights_raise_the_bound_to_the_optimum():
    b = Builder()
    chains(b, ["aba", "bab"])
    view = b.graph.view()
    # A.3: x once, a twice, b twice, s three times; but no schedule of the two chains' a/s/b
    # order takes fewer than 8 batches of a, b and s
    assert lower_bound(view) == 1 + 2 + 2 + 3
    assert path_bound(view) == optimum(view) == 1 + 8


def shortest_supersequence(p, q) -> int:
    table = [[0] * (len(q) + 1) for _ in range(len(p) + 1)]  # LCS of prefixes
    for i, a in enumerate(p):
        for j, b in enumerate(q):
            table[i + 1][j + 1] = table[i][j] + 1 if a == b else max(table[i][j + 1], table[i + 1][j])
    return len(p) + len(q) - table[-1][-1]


@settings(max_examples=60, deadline=None)
@given(st.sets(st.lists(st.integers(0, 2), min_size=1, max_size=140).map(tuple), min_size=1, max_size=4))
def test_longest_supersequence_against_the_dynamic_program(sequences):
    # past 64 letters a bit vector spans words, and carries and borrows cross them
    expected = max([*map(len, sequences),
                    *(shortest_supersequence(p, q) for p in sequences for q in sequences if p != q)])
    assert _longest_supersequence(sequences) == expected
