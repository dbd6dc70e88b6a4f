"""``by_type``: the agenda's schedule without a frontier, wherever it answers, equal to the
frontier's (batches, their order and the order inside each), and None where the agenda splits a
type."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import batching
from batching.bytype import by_type
from batching.schedulers import agenda_rank
from batching.synthetic import Builder


def frontier_agenda(view):
    return [b.tolist() for b in batching.run_agenda(view, batching.AgendaScheduler().priorities(view))]


@st.composite
def layered(draw, max_nodes=60):
    """Graphs whose types read only types of a lower layer (so no type reads itself), some of
    them segments of a larger graph (inputs made before the segment), with nodes of several
    instances interleaved: a map flush's shape. The agenda may still split a type there."""
    b = Builder()
    layers = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))     # types per layer
    names = [[f"L{layer}t{k}/{layer and 1 + k % 2}" for k in range(count)] for layer, count in enumerate(layers)]
    outside = [b.node("outside/0") for _ in range(draw(st.integers(0, 3)))]
    start = len(b.graph.sig)
    made = [[] for _ in layers]     # per layer, the nodes made so far
    for _ in range(draw(st.integers(1, max_nodes))):
        layer = draw(st.integers(0, len(layers) - 1))
        if layer and not any(made[:layer]):
            layer = 0
        name = draw(st.sampled_from(names[layer]))
        arity = int(name.rsplit("/", 1)[1])
        pool = [v for lower in made[:layer] for v in lower] + outside
        inputs = tuple(draw(st.sampled_from(pool)) for _ in range(arity)) if arity else ()
        made[layer].append(b.node(name, inputs, heavy=draw(st.booleans())))
    return b.graph.view(start, 0)     # the outside nodes have no input slots


@settings(max_examples=300, deadline=None)
@given(layered())
def test_by_type_is_the_agenda_wherever_it_answers(view):
    batches = by_type(view, agenda_rank(view))
    agenda = frontier_agenda(view)
    if batches is None:     # the agenda splits some type: more batches than types
        assert len(agenda) > view.ntypes
    else:
        assert [b.tolist() for b in batches] == agenda
    assert [b.tolist() for b in batching.AgendaScheduler().schedule(view)] == agenda


def test_a_consumer_reads_its_producers_in_their_order():
    """Two producer types (a join with a padded slot or without), one consumer type reading
    them, instances interleaved: the consumer's batch follows the producers' batches (a view of
    their rows in the executor), not the recording order."""
    b = Builder()
    x = b.node("x/0")
    scores = []
    for i in range(6):
        joined = b.node("joinA/1" if i % 2 else "joinB/1", (x,))
        scores.append(b.node("score/1", (joined,)))
    view = b.graph.view(1, 0)
    batches = [b.tolist() for b in by_type(view, agenda_rank(view))]
    assert batches == frontier_agenda(view)
    assert batches[-1] == [3, 7, 11, 1, 5, 9]   # joinA's scores (local ids), then joinB's


def test_chains_and_splits_fall_back_to_the_frontier():
    b = Builder()
    h = b.node("x/0")
    for _ in range(3):
        h = b.node("step/1", (h,))
    view = b.graph.view()
    assert by_type(view, agenda_rank(view)) is None     # a type reading itself
    b = Builder()
    a0, a1 = b.node("a/0"), b.node("a/0")
    c = b.node("c/1", (b.node("b/1", (a0,)),), heavy=True)
    b.node("d/1", (c,))
    b.node("d/1", (a1,))
    view = b.graph.view()
    # d and c tie on average depth (2), cheap d goes first: once b is taken, d's one ready
    # node is batched before c, and d's other node after it
    assert by_type(view, agenda_rank(view)) is None
    assert len(frontier_agenda(view)) == 5
