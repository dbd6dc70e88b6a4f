"""Schedulers on synthetic graphs: validity, hand-counted batch numbers, the lower bound."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import (PART_BITS, AgendaScheduler, DepthScheduler, Graph, InvalidSchedule,
                      SignatureTable, check_schedule, lower_bound, resolve)

SCHEDULERS = [DepthScheduler(), AgendaScheduler()]


class Builder:
    """Records nodes the way the lazyarray recorder does (depth at record time)."""

    def __init__(self):
        self.table = SignatureTable()
        self.graph = Graph(self.table)

    def type(self, name, nref=1, heavy=False):
        return self.table.intern(name, nref, 0, heavy, name, None)

    def node(self, sig, *inputs):
        g = self.graph
        g.sig.append(sig)
        g.depth.append(max((g.depth[i] + 1 for i in inputs), default=0))
        g.ins.extend(i << PART_BITS for i in inputs)
        return len(g.sig) - 1


def chains_with_losses(lengths):
    """RNN-like chains with a loss after every step (DyNet Fig. 1)."""
    b = Builder()
    x, step, loss = b.type("x", 0), b.type("step"), b.type("loss", heavy=True)
    for n in lengths:
        h = b.node(x)
        for _ in range(n):
            h = b.node(step, h)
            b.node(loss, h)
    return b.graph.view()


@pytest.mark.parametrize("scheduler", SCHEDULERS, ids=lambda s: s.name)
def test_schedules_are_valid_and_above_the_bound(scheduler):
    view = chains_with_losses([3, 1, 4, 2])
    batches = scheduler.schedule(view)
    check_schedule(view, batches)
    assert len(batches) >= lower_bound(view)


def test_hand_counted_chain_batches():
    view = chains_with_losses([3, 1])
    # depth: x | step(d1) | loss(d2) step(d2) | loss(d3) step(d3) | loss(d4)  = 1 + 1 + 2 + 2 + 1
    assert len(DepthScheduler().schedule(view)) == 7
    # agenda: x, 3 steps, then every loss at once
    assert len(AgendaScheduler().schedule(view)) == 5
    assert lower_bound(view) == 5


def test_agenda_beats_depth_when_losses_sit_at_different_depths():
    view = chains_with_losses([1, 2, 3, 4, 5])
    depth, agenda = (len(s.schedule(view)) for s in SCHEDULERS)
    assert agenda < depth
    assert agenda == lower_bound(view) == 1 + 5 + 1


def test_agenda_prefers_cheap_types_on_ties():
    b = Builder()
    x, cheap, heavy = b.type("x", 0), b.type("cheap"), b.type("heavy", heavy=True)
    root = b.node(x)
    b.node(heavy, root)
    b.node(cheap, root)
    view = b.graph.view()
    order = [view.type_labels[view.types[batch[0]]] for batch in AgendaScheduler().schedule(view)]
    assert order == ["x", "cheap", "heavy"]


def test_lower_bound_counts_longest_type_chains():
    b = Builder()
    a, c = b.type("a", 0), b.type("c")
    first = b.node(a)
    mid = b.node(c, first)
    b.node(c, mid)          # c-chain of 2
    b.node(a)               # a alone
    assert lower_bound(b.graph.view()) == 1 + 2


def test_segments_ignore_executed_inputs():
    b = Builder()
    s = b.type("s", 0)
    t = b.type("t")
    first = b.node(s)
    b.node(t, first)
    b.node(t, first)
    view = b.graph.view(start=1, ins_start=0)
    assert len(view) == 2 and len(view.indices) == 0
    assert [len(x) for x in AgendaScheduler().schedule(view)] == [2]


def test_a_view_keeps_the_columns_as_they_were_and_recording_goes_on():
    """A view copies the columns (``array('q')``): recording appends while one is alive (a live
    buffer export would make the append raise BufferError) and a later rewrite of a node
    (fusion's) or a rollback leaves the view as it was, its depths too."""
    b = Builder()
    x, step = b.type("x", 0), b.type("step")
    h = b.node(x)
    for _ in range(3000):   # past several reallocations of the columns
        h = b.node(step, h)
    whole, tail = b.graph.view(), b.graph.view(2990, 2989)
    for _ in range(3000):
        h = b.node(step, h)
    b.graph.sig[5] = b.graph.sig[0]
    del b.graph.sig[3001:], b.graph.depth[3001:], b.graph.ins[3000:]
    assert whole.sig.tolist() == [x] + [step] * 3000 and whole.depth.tolist() == list(range(3001))
    assert whole.ins.tolist() == [i << PART_BITS for i in range(3000)]
    assert tail.refs.tolist() == [-1] + [i << PART_BITS for i in range(10)]
    assert tail.depth.tolist() == list(range(11))


def test_a_segment_counts_depth_from_its_own_start():
    """After a flush, a node reading only earlier results is at depth 0 (DyNet's agenda counts
    the inputs it has yet to run): the types of a small flush are ranked by where they sit in
    it, not by how deep the sentences they read were. Ranked by recorded depth, the agenda took
    the scores of the shallow join before the deep join had run, and batched them twice."""
    b = Builder()
    x, step = b.type("x", 0), b.type("step")
    deep = shallow = b.node(x)
    for _ in range(10):
        deep = b.node(step, deep)
    start = len(b.graph.sig)
    join_a, join_b, score = b.type("joinA"), b.type("joinB"), b.type("score")
    for i in range(4):
        b.node(score, b.node(join_a, deep) if i % 2 else b.node(join_b, shallow))
    view = b.graph.view(start, start - 1)   # x has no input slot
    assert view.depth.tolist() == [0, 1] * 4
    assert [len(batch) for batch in AgendaScheduler().schedule(view)] == [2, 2, 4]


def test_check_schedule_rejects_bad_schedules():
    view = chains_with_losses([2])
    good = AgendaScheduler().schedule(view)
    with pytest.raises(InvalidSchedule):
        check_schedule(view, good[::-1])
    with pytest.raises(InvalidSchedule):
        check_schedule(view, good[:-1])
    with pytest.raises(InvalidSchedule):
        check_schedule(view, [np.concatenate(good)])


def test_resolve_names_and_objects():
    assert resolve("depth").name == "depth"
    obj = AgendaScheduler()
    assert resolve(obj) is obj
    with pytest.raises(ValueError, match="unknown scheduler"):
        resolve("fastest")
    with pytest.raises(TypeError):
        resolve(42)


@st.composite
def random_dags(draw):
    b = Builder()
    types = [b.type(f"t{k}", nref=k % 3) for k in range(draw(st.integers(1, 4)))]
    nodes = []
    for _ in range(draw(st.integers(1, 40))):
        candidates = [t for t in types if b.table.nref[t] == 0 or nodes]
        t = draw(st.sampled_from(candidates))
        ins = [draw(st.sampled_from(nodes)) for _ in range(b.table.nref[t])]
        nodes.append(b.node(t, *ins))
    return b.graph.view()


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_random_graphs_schedule_validly(view):
    bound = lower_bound(view)
    for scheduler in SCHEDULERS:
        batches = scheduler.schedule(view)
        check_schedule(view, batches)
        assert len(batches) >= bound


@settings(max_examples=100, deadline=None)
@given(random_dags(), st.data())
def test_ancestors_are_what_a_walk_back_from_the_seeds_reaches(view, data):
    """What a backward from some losses reaches, against a plain walk over the inputs."""
    n = len(view)
    seeds = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3), label="seeds")
    want, stack = set(), list(seeds)
    while stack:
        v = stack.pop()
        if v not in want:
            want.add(v)
            stack.extend(view.indices[view.indptr[v]:view.indptr[v + 1]].tolist())
    assert set(np.flatnonzero(view.ancestors(np.array(seeds))).tolist()) == want


@settings(max_examples=60, deadline=None)
@given(random_dags(), st.data())
def test_segment_depth_is_the_longest_path_inside_the_segment(whole, data):
    start = data.draw(st.integers(0, len(whole)), label="start")
    graph = whole._graph
    ins_start = sum(graph.table.nref[s] for s in graph.sig[:start])
    view = graph.view(start, ins_start)
    want = []
    for v in range(len(view)):
        inputs = view.indices[view.indptr[v]:view.indptr[v + 1]].tolist()
        want.append(1 + max(want[u] for u in inputs) if inputs else 0)
    assert view.depth.tolist() == want


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_a_segment_view_is_its_nodes_slots_read_plainly(data):
    """A segment's references (output parts, integer data between them, inputs of earlier
    nodes as -1), slot offsets, edges, consumers and type counts, against a loop over its
    nodes."""
    table = SignatureTable()
    kinds = [(nref, naux) for nref in range(3) for naux in range(3)]
    sigs = [table.intern(k, *k, False, str(k), None) for k in kinds]
    graph = Graph(table)
    for v in range(data.draw(st.integers(1, 30), label="nodes")):
        sig = data.draw(st.sampled_from(sigs if v else sigs[:3]), label="sig")
        nref, naux = kinds[sig]
        graph.sig.append(sig)
        graph.depth.append(0)
        graph.ins.extend(data.draw(st.integers(0, v - 1)) << PART_BITS | data.draw(st.integers(0, 2))
                         for _ in range(nref))
        graph.ins.extend(data.draw(st.integers(-5, 5)) for _ in range(naux))
    start = data.draw(st.integers(0, len(graph) - 1), label="start")
    ins_start = sum(sum(kinds[s]) for s in graph.sig[:start])
    view = graph.view(start, ins_start)
    refs, offsets, edges, at = [], [], [], ins_start
    for v, sig in enumerate(graph.sig[start:]):
        nref, naux = kinds[sig]
        offsets.append(at - ins_start)
        for r in graph.ins[at:at + nref]:
            refs.append(max(r - (start << PART_BITS), -1))
            if r >> PART_BITS >= start:
                edges.append(((r >> PART_BITS) - start, v))
        at += nref + naux
    assert view.refs.tolist() == refs and view.offsets.tolist() == offsets
    assert list(zip(*(e.tolist() for e in view.edges))) == edges
    readers = sorted({v for _, v in edges})
    first, nodes = view.consumers
    assert nodes.tolist() == readers and first.tolist() == [[v for _, v in edges].index(r) for r in readers]
    assert view.type_counts == [view.sig.tolist().count(s) for s in view.type_sigs.tolist()]
