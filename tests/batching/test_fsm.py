"""The FSM scheduler (ED-Batch §2): frontier bookkeeping against brute force, the Fig. 1 / Fig. 10
examples, learning, the sufficient-condition heuristic, policy files, and the "fsm" scheduler."""
import json
import random
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import batching
from batching import fsm, qlearning
from batching.encodings import encoder, vocabulary_ids
from batching.frontier import Frontier, agenda_rank, rollout
from batching.synthetic import Builder, swapped_trees, tree_network
from batching.typewise import _Hits, typewise_inputs


# -- helpers ------------------------------------------------------------------------------------

@st.composite
def dags(draw, max_nodes=40, ntypes=4):
    """Random graphs: each node one of ``ntypes`` kinds and up to 3 earlier inputs (the label
    names kind and arity, since a signature has one arity)."""
    b = Builder()
    for v in range(draw(st.integers(1, max_nodes))):
        k = draw(st.integers(0, min(3, v)))
        inputs = tuple(draw(st.lists(st.integers(0, v - 1), min_size=k, max_size=k))) if k else ()
        b.node(f"t{draw(st.integers(0, ntypes - 1))}/{k}", inputs)
    return b.graph.view()


@st.composite
def forests(draw, ntypes=8):
    """A scope of several instances (random graphs) that share an input and feed one sum, their
    types shared by some instances and not others: the typewise search's pieces reuse columns."""
    b = Builder()
    shared, ends = b.node("in/0"), []
    for _ in range(draw(st.integers(1, 5))):
        nodes = [shared]
        for _ in range(draw(st.integers(1, 12))):
            k = draw(st.integers(0, 2))
            inputs = tuple(draw(st.lists(st.sampled_from(nodes), min_size=k, max_size=k)))
            nodes.append(b.node(f"t{draw(st.integers(0, ntypes - 1))}/{k}", inputs))
        ends.append(nodes[-1])
    b.node(f"sum/{len(ends)}", tuple(ends))
    return b.graph.view()


def ancestors(view):
    """Per node, the set of its strict ancestors (brute force)."""
    anc = []
    for v in range(len(view)):
        mine = set()
        for u in view.indices[view.indptr[v]:view.indptr[v + 1]].tolist():
            mine |= anc[u] | {u}
        anc.append(mine)
    return anc


def same_type_frontier(view, anc, executed, t):
    """|Frontier(G^t)| by definition: unexecuted t-nodes with no unexecuted t-ancestor."""
    types = view.types
    return sum(1 for v in range(len(view)) if types[v] == t and v not in executed
               and not any(types[u] == t and u not in executed for u in anc[v]))


# -- G^a and the incremental frontier ----------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(st.one_of(dags(), forests()))
def test_typewise_edges_are_same_type_ancestors_that_cover_all(view):
    anc = ancestors(view)
    sptr, succ = view.successors()
    src, dst = typewise_inputs(view, sptr, succ)
    types = view.types
    for u, v in zip(src.tolist(), dst.tolist()):
        assert types[u] == types[v] and u in anc[v]
    cover = {v: set() for v in range(len(view))}
    for u, v in zip(src.tolist(), dst.tolist()):
        cover[v].add(u)
    for v in range(len(view)):
        for w in anc[v]:
            if types[w] == types[v]:
                assert any(w == u or w in anc[u] for u in cover[v]), (w, v)


def lstm_chains(chains=3, length=6):
    """Op-level LSTM steps: sigmoid(f) of every step reaches the next ones' through c with no
    sigmoid between, and the h path runs beside the tanh chain, so the search skips through
    hits of hits."""
    b = Builder()
    for _ in range(chains):
        h = c = b.node("zero/0")
        for _ in range(length):
            g = b.node("mm/2", (b.node("embed/0"), h))
            i, f, o = (b.node("sigmoid/1", (g,)) for _ in range(3))
            c = b.node("add/2", (b.node("mul/2", (f, c)), b.node("mul/2", (i, b.node("tanh/1", (g,))))))
            h = b.node("mul/2", (o, b.node("tanh/1", (c,))))
    return b.graph.view()


def edges_with_rows_of(width, view):
    sptr, succ = view.successors()
    kept, _Hits.WIDTH = _Hits.WIDTH, width
    try:
        return sorted(zip(*map(np.ndarray.tolist, typewise_inputs(view, sptr, succ))))
    finally:
        _Hits.WIDTH = kept


def test_typewise_edges_do_not_depend_on_how_many_hits_a_row_holds():
    """Hits past a node's row of the dense table go to Python sets: rows of 1 send most there."""
    view = lstm_chains()
    assert edges_with_rows_of(1, view) == edges_with_rows_of(_Hits.WIDTH, view)


@settings(max_examples=100, deadline=None)
@given(dags(max_nodes=60, ntypes=2))
def test_typewise_edges_do_not_depend_on_how_many_hits_a_row_holds_on_random_graphs(view):
    assert edges_with_rows_of(1, view) == edges_with_rows_of(_Hits.WIDTH, view)


@settings(max_examples=100, deadline=None)
@given(st.one_of(dags(), forests()), st.randoms(use_true_random=False))
def test_frontier_counts_match_brute_force_along_random_schedules(view, rnd):
    anc = ancestors(view)
    gid = rnd.sample(range(3 * view.ntypes), view.ntypes)  # vocabulary ids in no particular order
    f = Frontier(view, typewise=True, gid=gid)
    executed = set()
    while f.done < f.n:
        for t in range(view.ntypes):
            ready = [v for v in range(len(view)) if view.types[v] == t and v not in executed
                     and all(u in executed for u in anc[v])]
            assert f.count[t] == len(ready)
            assert f.front[t] == same_type_frontier(view, anc, executed, t)
        live = [t for t in range(view.ntypes) if f.count[t]]
        assert f.order == [g for _, g in sorted((-f.count[t], gid[t]) for t in live)]
        batch = f.take(rnd.choice(live))
        executed |= set(batch.tolist())
    assert f.done == len(view) == len(executed)


@settings(max_examples=150, deadline=None)
@given(st.one_of(dags(), forests()))
def test_lower_bound_read_off_the_typewise_edges_is_the_lower_bound(view):
    assert Frontier(view, typewise=True).bound == batching.lower_bound(view)


@settings(max_examples=60, deadline=None)
@given(dags())
def test_every_new_scheduler_gives_valid_schedules(view):
    policy = batching.learn_policy([view], episodes=20, check_every=5)
    for scheduler in (batching.SufficientScheduler(), policy, batching.FSMScheduler(episodes=5)):
        batching.check_schedule(view, scheduler.schedule(view))


def test_encodings():
    b = Builder()
    for _ in range(3):
        b.node("a")
    b.node("b")
    x = b.node("c")
    b.node("c")
    b.node("d", (x,))
    view = b.graph.view()
    gid = [10 * (t + 1) for t in range(view.ntypes)]  # vocabulary ids of a, b, c, d
    f = Frontier(view, gid=gid)
    assert view.type_labels == ["a", "b", "c", "d"]
    assert encoder("base")(f) == (10, 20, 30)
    assert encoder("max")(f) == (10, 20, 30, 10)
    assert encoder("sort")(f) == (10, 30, 20)
    assert encoder("sort", phases=4)(f) == (10, 30, 20, 0)
    f.take(0)
    assert encoder("sort", phases=4)(f) == (30, 20, 1)
    with pytest.raises(ValueError, match="encoding"):
        encoder("bogus")


# -- ED-Batch Fig. 1 / Fig. 2 and Fig. 10 --------------------------------------------------------

@pytest.fixture(scope="module")
def fig1():
    return tree_network(64, leaves=8, seed=0).view()


def test_fig1_depth_and_agenda_split_the_outputs_the_fsm_does_not(fig1):
    bound = batching.lower_bound(fig1)
    assert bound == 10  # L, 7 levels of I at most, O once, R
    assert len(batching.DepthScheduler().schedule(fig1)) == 21
    assert len(batching.AgendaScheduler().schedule(fig1)) == 17
    assert len(batching.SufficientScheduler().schedule(fig1)) == bound
    labels = fig1.type_labels
    for encoding in batching.ENCODINGS:
        policy = batching.learn_policy([fig1], encoding=encoding)
        batches = policy.schedule(fig1)
        batching.check_schedule(fig1, batches)
        assert len(batches) == bound
        outputs = [b for b in batches if labels[fig1.types[b[0]]] == "O"]
        assert len(outputs) == 1 and len(outputs[0]) == 64 * 15  # every O node in one batch


@pytest.mark.parametrize("prior", ["agenda", "optimistic"])
def test_fig2_q_learning_finds_the_fsm_from_scratch(fig1, prior):
    """Without the sufficient-condition prior, Q-learning itself must find Fig. 2(a): at
    frontier {I, O} batch I."""
    policy = batching.learn_policy([fig1], prior=prior, encoding="base", seed=1)
    assert len(policy.schedule(fig1)) == 10
    assert policy.stats["episodes"] <= 200
    i, o = policy.vocab["I"], policy.vocab["O"]
    both = [s for s in policy.table if s == tuple(sorted((i, o)))]
    assert both and all(max(policy.table[s], key=policy.table[s].get) == i for s in both)


def test_fig1_policy_holds_on_other_trees(fig1):
    policy = batching.learn_policy([tree_network(64, 8, seed=s).view() for s in (1, 2)])
    for seed in range(3, 8):
        view = tree_network(64, 8, seed=seed).view()
        assert len(policy.schedule(view)) == batching.lower_bound(view)


def test_fig10_needs_more_than_the_frontier_set():
    view = swapped_trees(32, leaves=8, seed=0).view()
    bound = batching.lower_bound(view)
    assert (bound, len(batching.AgendaScheduler().schedule(view))) == (19, 26)
    assert len(batching.SufficientScheduler().schedule(view)) == 36  # the heuristic is fooled
    # E_base from scratch cannot tell the halves apart; the phase can, and so can E_sort
    # (counts order I and O differently in each half).
    base = batching.learn_policy([view], encoding="base", prior="agenda", episodes=300)
    phased = batching.learn_policy([view], encoding="base", prior="agenda", phases=2, episodes=300)
    ordered = batching.learn_policy([view], encoding="sort", prior="agenda", episodes=300)
    assert len(base.schedule(view)) > bound
    assert len(phased.schedule(view)) == bound
    assert len(ordered.schedule(view)) == bound


# -- learning ------------------------------------------------------------------------------------

def test_learning_is_deterministic_for_a_seed():
    view = swapped_trees(16, 6, seed=3).view()
    a, b = (batching.learn_policy([view], prior="agenda", episodes=100, seed=7) for _ in range(2))
    assert a.table == b.table and a.stats["batches"] == b.stats["batches"]


def _tied(first: str) -> batching.GraphView:
    """Chains u -> v -> w per instance in two families (a, b) whose types have equal depths and
    weights, so the agenda order alone cannot tell them apart; the family ``first`` has its
    signatures interned first (as a process that met that model first would)."""
    b, rng = Builder(), random.Random(0)
    for family in (first, "b" if first == "a" else "a"):
        b.node(f"{family}u")
    for _ in range(24):
        family = rng.choice("ab")
        w = b.node(f"{family}w", (b.node(f"{family}v", (b.node(f"{family}u"),)),))
        if rng.random() < 0.5:
            b.node("x", (w,))
    return b.graph.view()


def test_learning_does_not_depend_on_the_order_signatures_were_met():
    one, other = _tied("a"), _tied("b")
    assert one.type_labels != other.type_labels  # local type ids differ
    p, q = (batching.learn_policy([v], prior="agenda", episodes=60, check_every=20) for v in (one, other))
    assert p.table == q.table
    assert [len(b) for b in p.schedule(one)] == [len(b) for b in q.schedule(other)]


def test_learning_stops_at_the_lower_bound_and_reports(fig1):
    policy = batching.learn_policy([fig1], prior="agenda", encoding="base")
    stats = policy.stats
    assert stats["batches"] == stats["lower_bound"] == 10
    assert stats["episodes"] % 50 == 0 and stats["episodes"] < 1000
    assert stats["seconds"] > 0 and stats["states"] == len(policy.table)


def test_learning_options_are_checked(fig1):
    with pytest.raises(TypeError, match="unknown learning options"):
        batching.learn_policy([fig1], episods=3)
    with pytest.raises(ValueError, match="encoding"):
        batching.learn_policy([fig1], encoding="bogus")
    with pytest.raises(ValueError, match=r"options: epsilon=2 \(must be in \[0, 1\]\)$"):
        batching.learn_policy([fig1], epsilon=2)
    with pytest.raises(ValueError, match=r"options: refine_nodes=-1 \(must be >= 0\); time_limit='1s'"):
        batching.learn_policy([fig1], refine_nodes=-1, time_limit="1s")
    with pytest.raises(ValueError, match="non-empty"):
        batching.learn_policy([])


def test_time_limit_and_patience_stop_learning():
    view = swapped_trees(16, 6).view()
    quick = batching.learn_policy([view], prior="agenda", encoding="base", time_limit=0.0)
    assert quick.stats["episodes"] == 1
    stats = batching.learn_policy([view], prior="agenda", encoding="base", check_every=10, patience=2).stats
    assert stats["episodes"] <= stats["best_episode"] + 20

def test_node_limit_bounds_learning_the_same_way_every_time():
    """A budget of nodes batched stops learning where seconds would stop it at a point that
    depends on the machine: the same table every run."""
    view = swapped_trees(16, 6).view()
    options = dict(prior="agenda", encoding="base", check_every=5, patience=None, patience_nodes=None)
    unbounded = batching.learn_policy([view], episodes=60, **options).stats["episodes"]
    runs = [batching.learn_policy([view], episodes=60, node_limit=20 * len(view), **options) for _ in range(2)]
    assert runs[0].table == runs[1].table
    assert runs[0].stats["episodes"] < unbounded
    with pytest.raises(ValueError, match=r"options: node_limit=-1 \(must be >= 0 or None\)$"):
        batching.learn_policy([view], node_limit=-1)



# -- policy files --------------------------------------------------------------------------------

def test_save_and_load_give_identical_schedules(tmp_path, fig1):
    view = swapped_trees(16, 6, seed=1).view()
    for policy in (batching.learn_policy([fig1], encoding="max"),
                   batching.learn_policy([view], encoding="base", phases=2, prior="agenda", episodes=100)):
        path = tmp_path / "p.json"
        policy.save(path)
        loaded = batching.load_policy(path)
        assert loaded.table == policy.table and loaded.labels == policy.labels
        assert (loaded.encoding, loaded.phases) == (policy.encoding, policy.phases)
        for v in (fig1, view):
            assert [b.tolist() for b in loaded.schedule(v)] == [b.tolist() for b in policy.schedule(v)]


def test_bad_policy_files_are_rejected_clearly(tmp_path, fig1):
    policy = batching.learn_policy([fig1])
    doc = policy.to_json()
    path = tmp_path / "p.json"

    def load(text):
        path.write_text(text)
        return batching.load_policy(path)

    with pytest.raises(batching.PolicyError, match="not JSON"):
        load(json.dumps(doc)[:-10])
    with pytest.raises(batching.PolicyError, match="not a lazyarray FSM policy"):
        load(json.dumps({"hello": 1}))
    with pytest.raises(batching.PolicyError, match="version 99"):
        load(json.dumps(dict(doc, version=99)))
    with pytest.raises(batching.PolicyError, match="corrupt"):
        load(json.dumps(dict(doc, encoding="zigzag")))
    with pytest.raises(batching.PolicyError, match="corrupt"):
        load(json.dumps(dict(doc, table=[[[0, 99], [[0, 1.0]]]])))
    with pytest.raises(batching.PolicyError, match="corrupt"):
        load(json.dumps(dict(doc, table=[[[0, 1], [[2, 1.0]]]])))
    with pytest.raises(batching.PolicyError, match="corrupt"):
        load(json.dumps({k: v for k, v in doc.items() if k != "labels"}))


GOOD = {"format": "lazyarray-fsm-policy", "version": 1, "encoding": "sort", "phases": 0, "labels": ["a", "b"],
        "stats": {"episodes": 3}, "table": [[[0, 1], [[0, 1.0], [1, 0.5]]], [[1], []]]}


def _doc(**changes):
    return json.dumps({k: v for k, v in {**GOOD, **changes}.items() if v is not ...})


MALFORMED = {  # name: (file text, what the error names)
    "deeply nested JSON": (_doc()[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
    "an integer of 5000 digits": (_doc()[:-1] + ', "y": ' + "9" * 5000 + "}", "digits"),
    "a value of 10**400": (_doc(table=[[[0], [[0, 10 ** 400]]]]), "digits"),
    "a value of 1e400": (_doc(table=[[[0], [[0, 1.5]]]]).replace("1.5", "1e400"), "out of range"),
    "a NaN value": (_doc(table=[[[0], [[0, float("nan")]]]]), "NaN"),
    "an infinite value": (_doc(table=[[[0], [[0, float("inf")]]]]), "Infinity"),
    "a value as a string": (_doc(table=[[[0], [[0, "1e3"]]]]), "value"),
    "an action as a string": (_doc(table=[[[0], [["0", 1.0]]]]), "action"),
    "an action 0.9": (_doc(table=[[[0], [[0.9, 1.0]]]]), "action"),
    "an action as a boolean": (_doc(table=[[[0], [[True, 1.0]]]]), "action"),
    "an action off the state": (_doc(table=[[[0], [[1, 1.0]]]]), "action"),
    "an action twice": (_doc(table=[[[0, 1], [[0, 1.0], [0, 2.0]]]]), "twice"),
    "type ids as booleans": (_doc(table=[[[True], []]]), "unknown types"),
    "a type id past the labels": (_doc(table=[[[0, 2], []]]), "unknown types"),
    "a state twice": (_doc(table=[[[0], []], [[0], []]]), "twice"),
    "an empty state": (_doc(table=[[[], []]]), "no types"),
    "an E_sort state repeating a type": (_doc(table=[[[0, 0], []]]), "E_sort"),
    "an E_base state out of order": (_doc(encoding="base", table=[[[1, 0], []]]), "E_base"),
    "an E_max state without its most common type": (_doc(encoding="max", table=[[[0, 1], []]]), "E_max"),
    "a phase out of range": (_doc(phases=2, table=[[[0, 1, 2], []]]), "phase"),
    "an entry that is no pair": (_doc(table=[[[0], [], []]]), "pair"),
    "actions as an object": (_doc(table=[[[0], {"0": 1.0}]]), "pair"),
    "an action pair of three": (_doc(table=[[[0], [[0, 1.0, 2]]]]), "pair"),
    "a table that is no list": (_doc(table={"0": 1}), "table"),
    "labels as a string": (_doc(labels="ab"), "labels"),
    "no labels": (_doc(labels=[]), "labels"),
    "labels repeated": (_doc(labels=["a", "a"]), "labels"),
    "phases as a boolean": (_doc(phases=True), "phases"),
    "negative phases": (_doc(phases=-1), "phases"),
    "an encoding as a number": (_doc(encoding=3), "encoding"),
    "version as a boolean": (_doc(version=True), "version"),
    "nested stats": (_doc(stats={"a": [1]}), "stats"),
    "an unknown field": (_doc(extra=1), "unknown fields"),
    "no table": (_doc(table=...), "table"),
    "not UTF-8": (_doc().replace('"a"', '"\xe9"').encode("latin-1"), "UTF-8"),
    "a list": ("[1, 2]", "not a lazyarray FSM policy"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_every_malformed_policy_file_is_a_policy_error_naming_the_fault(tmp_path, name):
    """Corrupt or hostile files escaped with RecursionError, OverflowError or ValueError, or were
    taken as nonsense policies (actions truncated from floats, booleans as type ids)."""
    text, fault = MALFORMED[name]
    path = tmp_path / "p.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(batching.PolicyError, match=fault):
        batching.load_policy(path)


def test_a_well_formed_policy_file_loads_as_written(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(_doc())
    policy = batching.load_policy(path)
    assert policy.table == {(0, 1): {0: 1.0, 1: 0.5}, (1,): {}} and policy.stats == {"episodes": 3}
    with pytest.raises(batching.PolicyError, match="finite"):  # what no JSON file holds
        batching.FSMPolicy.from_json(dict(GOOD, table=[[[0], [[0, 10 ** 400]]]]))


def test_policy_files_over_the_size_limit_are_refused_before_they_are_parsed(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    path.write_text(_doc())
    monkeypatch.setattr(fsm, "MAX_BYTES", path.stat().st_size - 1)
    monkeypatch.setattr(json, "loads", None)  # parsing would fail otherwise
    with pytest.raises(batching.PolicyError, match="larger than a policy file may be"):
        batching.load_policy(path)
    monkeypatch.undo()
    monkeypatch.setattr(fsm, "MAX_BYTES", path.stat().st_size)
    assert batching.load_policy(path).labels == ["a", "b"]


def test_loading_a_policy_holds_memory_in_proportion_to_the_file(tmp_path):
    """A 55 MB file of a million states took 4.5 GB: the prefix votes were a trie of nested
    dicts, ~95 times the file's size at the peak; now ~20."""
    rng, table = random.Random(0), {}
    while len(table) < 10_000:
        state = tuple(rng.sample(range(40), rng.randint(3, 12)))
        table[state] = {state[0]: 1.0, state[1]: 0.5}
    path = tmp_path / "p.json"
    batching.FSMPolicy([f"t{i:02d}" for i in range(40)], table).save(path)
    tracemalloc.start()
    try:
        assert len(batching.load_policy(path).table) == 10_000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * path.stat().st_size


def test_policy_on_another_model_says_so_and_partial_overlap_falls_back(fig1):
    policy = batching.learn_policy([fig1])
    other = Builder()
    x = other.node("embed")
    other.node("relu", (x,))
    with pytest.raises(batching.PolicyError, match="other signatures"):
        policy.schedule(other.graph.view())
    mixed = Builder()  # Fig. 1 trees plus a type the policy never saw
    leaves = [mixed.node("L") for _ in range(4)]
    h = mixed.node("I", (leaves[0], leaves[1]))
    mixed.node("O", (h,))
    mixed.node("extra", (leaves[2], leaves[3]))
    view = mixed.graph.view()
    batching.check_schedule(view, policy.schedule(view))
    assert policy.schedule(batching.Graph(batching.SignatureTable()).view()) == []


# -- scheduler="fsm" ---------------------------------------------------------------------------

def test_fsm_by_name_learns_once_per_model_and_reuses(fig1):
    scheduler = batching.resolve("fsm")
    assert isinstance(scheduler, batching.FSMScheduler)
    first = scheduler.policy(fig1)
    assert len(first.schedule(fig1)) == 10
    again = batching.resolve("fsm").policy(tree_network(64, 8, seed=9).view())
    assert again is first  # another scope, another graph of the same model
    assert batching.resolve("fsm").policy(swapped_trees(8, 4).view()) is not first
    assert isinstance(batching.resolve("sufficient"), batching.SufficientScheduler)


def _ready_graph(counts):
    """Nodes with no inputs: ``counts[label]`` of each label, so the first frontier holds them all."""
    b = Builder()
    for label, k in counts.items():
        for _ in range(k):
            b.node(label)
    return b.graph.view()


def test_unseen_sort_states_take_the_vote_of_their_longest_learned_prefix():
    labels = ["a", "b", "c", "d"]
    first = lambda policy, view: view.type_labels[view.types[policy.schedule(view)[0][0]]]  # noqa: E731
    # learned: with a then b most common, batch b (twice); with a then d: a
    table = {(0, 1): {1: 0.0, 0: -1.0}, (0, 1, 3): {1: 0.0}, (0, 3): {0: 0.0}, (1,): {1: 0.0}}
    policy = batching.FSMPolicy(labels, table)
    assert first(policy, _ready_graph({"c": 1, "a": 3, "b": 2})) == "b"  # (a, b, c): prefix (a, b) votes b
    assert first(policy, _ready_graph({"c": 1, "a": 3, "d": 2})) == "a"  # (a, d, c): prefix (a, d) votes a
    assert first(policy, _ready_graph({"d": 3, "c": 1})) == "c"  # (d, c): no learned prefix: agenda
    # (equal depths: ties go by label, whatever order the process met the signatures in)
    # a vote for a type outside the prefix does not count: (c, d, a, b) has prefixes (c, d) and
    # (c,), whose only vote is b, cast where b came third: the agenda rule (a)
    policy = batching.FSMPolicy(labels, {(2, 3, 1): {1: 0.0}})
    assert first(policy, _ready_graph({"d": 3, "c": 4, "a": 2, "b": 1})) == "a"
    # ... and there the prefix one shorter answers: (b, a, d) has prefixes (b, a), whose only
    # vote is c, and (b,), which votes b (itself) and c
    policy = batching.FSMPolicy(labels, {(1,): {1: 0.0}, (1, 0, 2): {2: 0.0}})
    assert first(policy, _ready_graph({"b": 3, "a": 2, "d": 1})) == "b"
    # the other encodings have no order to take prefixes of: unseen states use the agenda rule
    view = _ready_graph({"a": 3, "b": 2, "c": 1})
    assert first(batching.FSMPolicy(labels, {(0, 1): {1: 0.0}}, encoding="base"), view) == "a"
    # with phases, prefixes keep the phase
    assert first(batching.FSMPolicy(labels, {(0, 1, 0): {0: -1.0, 1: 0.0}}, phases=2), view) == "b"
    assert first(batching.FSMPolicy(labels, {(0, 1, 1): {1: 0.0}}, phases=2), view) == "a"


def test_sort_states_follow_twins_only_where_that_batches_the_samples_in_fewer():
    """Fig. 10: both halves' frontiers hold I and O, in one half I the more common, in the other
    O. Had new E_sort states followed the first learned state with the same types, the second
    half would batch as the first: 23 batches, not 19."""
    view = swapped_trees(32, leaves=8, seed=0).view()
    stats = batching.learn_policy([view], episodes=1, refine_nodes=0).stats
    assert stats["batches"] == stats["lower_bound"] == 19


def test_learning_with_several_samples_checks_tables_on_the_samples_they_did_not_fit():
    views = [swapped_trees(16, 6, seed=s).view() for s in (1, 2)]
    stats = batching.learn_policy(views, prior="agenda", episodes=100, check_every=25).stats
    assert stats["heldout"] >= stats["lower_bound"] and stats["batches"] >= stats["lower_bound"]
    assert batching.learn_policy(views[:1], prior="agenda", episodes=20).stats["heldout"] == 0  # one sample
    assert batching.learn_policy(views, episodes=20).stats["heldout"] is None  # at the bound: nothing to judge


def greedy_visits(policy, views) -> set:
    seen = set()
    for view in views:
        gid = vocabulary_ids(policy.vocab, view.type_labels)
        encode, f = encoder(policy.encoding), Frontier(view, gid=gid)
        for batch in policy.schedule(view):
            seen.add(encode(f))
            f.take(int(view.types[batch[0]]))
    return seen


def test_the_kept_table_is_the_fsm_its_greedy_schedules_visit():
    views = [tree_network(16, 6, seed=s).view() for s in (1, 2)]
    policy = batching.learn_policy(views, prior="agenda", episodes=100, check_every=25)
    assert greedy_visits(policy, views) == set(policy.table)  # no state met only while exploring


def test_recurring_states_the_prior_decided_join_the_kept_fsm(monkeypatch):
    """Off its greedy schedules, the kept FSM holds the states that the Lemma-1 prior decided
    while learning and that recurred, with the prior's choice (never updated: one action worth
    0); the samples' schedules do not change."""
    views = [swapped_trees(16, 6, seed=s).view() for s in (1, 2)]
    options = dict(encoding="base", episodes=200, check_every=25)
    policy = batching.learn_policy(views, **options)
    assert policy.stats["episodes"] and policy.stats["batches"] > policy.stats["lower_bound"]
    extra = set(policy.table) - greedy_visits(policy, views)
    assert extra and all(list(policy.table[state].values()) == [0.0] for state in extra)
    assert sum(len(policy.schedule(view)) for view in views) == policy.stats["batches"]
    monkeypatch.setattr(qlearning, "RECURRING", 10 ** 9)
    judged = batching.learn_policy(views, **options)
    assert set(judged.table) == set(policy.table) - extra == greedy_visits(judged, views)


def test_sufficient_scheduler_is_valid_on_fig10():
    view = swapped_trees(8, 5, seed=2).view()
    batching.check_schedule(view, batching.SufficientScheduler().schedule(view))
    assert batching.SufficientScheduler().schedule(batching.Graph(batching.SignatureTable()).view()) == []


def test_rollout_visits_nodes_in_batches_of_one_ready_type():
    view = tree_network(4, 5, seed=1).view()
    f = Frontier(view)
    rng = random.Random(0)
    batches = rollout(f, lambda f: rng.choice([t for t in range(f.ntypes) if f.count[t]]))
    batching.check_schedule(view, batches)
    assert sum(map(len, batches)) == len(view) and np.all(f.pending == 0)


# -- many types: the same schedules, at a cost linear in types ------------------------------------

def scanned(view, typewise: bool) -> list:
    """The agenda rule (with ``typewise``, §5.3's sufficient heuristic) as first written: each
    step scanned every type with ready nodes. Kept here to compare schedules with."""
    rank = agenda_rank(view)

    def ready(f):
        return [t for t in range(f.ntypes) if f.count[t]]

    def choose(f):
        if typewise:
            return max(ready(f), key=lambda t: (f.ratio(t), -rank[t]))
        return min(ready(f), key=rank.__getitem__)

    return [b.tolist() for b in rollout(Frontier(view, typewise=typewise), choose)]


@settings(max_examples=150, deadline=None)
@given(st.one_of(dags(ntypes=6), forests()))
def test_agenda_and_sufficient_pick_what_a_scan_of_every_ready_type_picks(view):
    assert [b.tolist() for b in batching.AgendaScheduler().schedule(view)] == scanned(view, False)
    assert [b.tolist() for b in batching.SufficientScheduler().schedule(view)] == scanned(view, True)


def many_shapes(instances: int):
    """A scope of instances of distinct shapes (a signature per sentence length, say): per
    instance an input, then tanh and a multiply twice (types of one and two nodes), all summed."""
    b = Builder()
    ends = []
    for k in range(instances):
        h = b.node(f"x{k}")
        for _ in range(2):
            h = b.node(f"mul{k}/1", (b.node(f"tanh{k}/1", (h,)),))
        ends.append(h)
    b.node("sum", tuple(ends))
    return b.graph.view()


def test_many_types_schedule_in_time_linear_in_types():
    """Each step scanned every ready type, and the typewise search held a column per type:
    24,000 types (8,000 instances) took about a minute; now a fraction of a second. The bound
    is generous, so that a slow machine passes."""
    view = many_shapes(8000)
    began = time.perf_counter()
    schedules = [scheduler.schedule(view) for scheduler in (batching.AgendaScheduler(), batching.SufficientScheduler())]
    assert time.perf_counter() - began < 10
    for batches in schedules:
        assert len(batches) == 5 * 8000 + 1  # a chain of 5 per instance, then the sum
        batching.check_schedule(view, batches)


# -- states of many types; policy files ----------------------------------------------------------

def test_states_of_thousands_of_types_learn_save_load_and_schedule(tmp_path):
    """The prefix votes were a trie walked recursively, a level per type of a state: 1,100
    ready types (inputs of distinct shapes) raised RecursionError in learning, loading and
    scheduler="fsm"."""
    view = _ready_graph({f"x{k:04d}": 1 for k in range(1100)})
    policy = batching.FSMScheduler(episodes=1).policy(view)  # scheduler="fsm": learns on the graph
    assert max(map(len, policy.table)) == 1100
    batching.check_schedule(view, policy.schedule(view))
    path = tmp_path / "p.json"
    policy.save(path)
    assert batching.load_policy(path).table == policy.table
    wide = batching.FSMPolicy([f"t{i:04d}" for i in range(3000)], {tuple(range(3000)): {2999: 0.0}})
    assert wide.schedule(_ready_graph({f"t{i:04d}": 1 for i in range(2999)}))  # an unseen state: prefix votes


def voted(table: dict, counts: list) -> int:
    """By definition, the type an E_sort policy over types 0, 1, ... (labels in that order)
    batches first on a frontier of ``counts[g]`` ready nodes of type g, all at depth 0: the
    table's choice; in a state it lacks, the votes of the learned states sharing its longest
    proper prefix (a learned state's vote counts at a prefix holding its choice; the most voted,
    ties to the lowest; none: the prefix one shorter); else the lowest type (the agenda rule)."""
    state = tuple(sorted((g for g in range(len(counts)) if counts[g]), key=lambda g: (-counts[g], g)))
    if table.get(state):
        return qlearning.greedy_act(table[state])
    learned = [s for s, q in table.items() if q]
    longest = max((k for k in range(1, len(state)) if any(s[:k] == state[:k] for s in learned)), default=0)
    for k in range(longest, 0, -1):
        votes = [a for a in (qlearning.greedy_act(table[s]) for s in learned if s[:k] == state[:k]) if a in state[:k]]
        if votes:
            return min(votes, key=lambda a: (-votes.count(a), a))
    return min(state)


@st.composite
def sort_tables(draw, ntypes=5):
    """E_sort tables over ``ntypes`` types: states of distinct types, some with no values."""
    states = draw(st.lists(st.permutations(range(ntypes)).flatmap(
        lambda p: st.integers(1, ntypes).map(lambda k: tuple(p[:k]))), max_size=25, unique=True))
    return {s: draw(st.dictionaries(st.sampled_from(s), st.sampled_from([-1.0, 0.0]), max_size=len(s)))
            for s in states}


@settings(max_examples=200, deadline=None)
@given(sort_tables(), st.lists(st.integers(0, 3), min_size=5, max_size=5).filter(any))
def test_unseen_sort_states_follow_the_prefix_votes_as_defined(table, counts):
    labels = list("abcde")
    view = _ready_graph({labels[g]: k for g, k in enumerate(counts) if k})
    first = view.type_labels[view.types[batching.FSMPolicy(labels, table).schedule(view)[0][0]]]
    assert first == labels[voted(table, counts)]
