"""Learned batching policies on the reference workloads: ``la.learn_policy``, ``la.load_policy``,
``la.batching(scheduler=policy)`` and ``scheduler="fsm"``."""
import json

import numpy as np
import pytest

import batching
import lazyarray as la
from lazyarray.policy import format_report, learn_policy, load_policy, scheduler_report
from lazyarray.workloads import WORKLOADS

TREES = WORKLOADS["treelstm"]
TREE_PARAMS = TREES.init(8, seed=0)
TREE_LAZY = TREE_PARAMS.lazy()


def tree_scope(trees):
    return TREES.scope_loss(TREE_LAZY, trees)


@pytest.fixture(scope="module")
def tree_policy():
    return learn_policy(tree_scope, [TREES.data(64, seed=s) for s in (100, 101)])


def test_treelstm_policy_reaches_the_bound_and_holds_on_1000_other_trees(tree_policy):
    stats = tree_policy.stats
    assert stats["batches"] <= 1.05 * stats["lower_bound"]
    fsm = agenda = bound = 0
    for seed in range(16):  # 1,024 other trees, one scope of 64 at a time
        view = la.record(tree_scope, TREES.data(64, seed=seed))
        batches = tree_policy.schedule(view)
        batching.check_schedule(view, batches)
        fsm += len(batches)
        agenda += len(batching.AgendaScheduler().schedule(view))
        bound += batching.lower_bound(view)
    assert fsm <= agenda and fsm <= 1.05 * bound, (fsm, agenda, bound)


def test_bilstm_policy_batches_no_more_than_the_agenda():
    w = WORKLOADS["bilstm"]
    lazy = w.init(8, seed=0).lazy()

    def scope(sentences):
        return w.scope_loss(lazy, sentences)

    policy = learn_policy(scope, [w.data(64, seed=s) for s in (100, 101)], episodes=100)
    for seed in range(2):
        view = la.record(scope, w.data(64, seed=seed))
        batches = policy.schedule(view)
        batching.check_schedule(view, batches)
        assert len(batches) <= len(batching.AgendaScheduler().schedule(view))


def _samples(name, instances):
    """Two sample graphs of a workload at H=8."""
    w = WORKLOADS[name]
    lazy = w.init(8, seed=0).lazy()
    return [la.record(lambda data: w.scope_loss(lazy, data), w.data(instances, seed=s)) for s in (100, 101)]


def test_new_sort_states_start_from_the_choice_of_states_with_the_same_types():
    """BiLSTM: once the output layer's nodes are the most common, E_sort states are new orders
    of the same frontier types; deciding them anew (the Lemma-1 prior) took 828 batches, not 778."""
    views = _samples("bilstm", 32)
    stats = batching.learn_policy(views, episodes=1, refine_nodes=0).stats
    assert stats["batches"] == stats["lower_bound"] == 778


def test_refinement_corrects_what_q_learning_left():
    """LSTM-NMT: one decoder state batches multiply before tanh (Lemma-1 ratios tie), a batch
    per decoder step that noisy Q-values do not remove; trying the other choice does."""
    views = _samples("lstmnmt", 32)
    rough = batching.learn_policy(views, episodes=1, refine_nodes=0).stats
    refined = batching.learn_policy(views, episodes=1).stats
    assert rough["batches"] > rough["lower_bound"] and rough["refined"] == 0
    assert refined["batches"] == refined["lower_bound"] and refined["refined"] >= 1


def test_results_under_a_policy_and_under_fsm_equal_eager(tree_policy):
    trees = TREES.data(16, seed=7)
    eager = float(tree_scope(trees))
    for scheduler in (tree_policy, "fsm"):
        with la.batching(scheduler=scheduler) as scope:
            total = tree_scope(trees)
        np.testing.assert_allclose(float(total), eager, rtol=1e-5)
        assert scope.stats.batches <= scope.stats.nodes


def test_saved_policy_loads_and_schedules_alike(tmp_path, tree_policy):
    path = tmp_path / "treelstm.policy.json"
    tree_policy.save(path)
    loaded = load_policy(path)
    view = la.record(tree_scope, TREES.data(32, seed=3))
    assert [b.tolist() for b in loaded.schedule(view)] == [b.tolist() for b in tree_policy.schedule(view)]
    path.write_text("{not json")
    with pytest.raises(batching.PolicyError, match="not JSON"):
        load_policy(path)


def test_learn_policy_checks_its_arguments():
    with pytest.raises(ValueError, match="at least one sample"):
        learn_policy(tree_scope, [])
    with pytest.raises(TypeError, match="unknown learning options"):
        learn_policy(tree_scope, [TREES.data(2)], episodes=5, speed=3)


def test_scheduler_report_tables():
    rows = scheduler_report(workloads=("treegru",), instances=8, H=8, train=1, episodes=20)
    (row,) = rows
    assert row["lower_bound"] <= row["path_bound"] <= min(row[k] for k in ("depth", "agenda", "sufficient", "fsm-sort"))
    assert set(row["ns"]) == {"depth", "agenda", "sufficient", "fsm-sort", "fsm-base", "fsm-max"}
    assert all(ns > 0 for ns in row["ns"].values())
    text = format_report(rows)
    assert "Fig. 9" in text and "Table 3" in text and "Run-time scheduling cost" in text and "treegru" in text


@pytest.mark.parametrize("stats", [5, [1, 2], "abc"])
def test_a_policy_file_whose_stats_are_not_an_object_is_a_policy_error(tmp_path, stats):
    view = la.record(lambda _: la.tanh(la.array(np.ones(2, np.float32))), None)
    policy = batching.learn_policy([view], episodes=1)
    doc = policy.to_json()
    doc["stats"] = stats
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(la.PolicyError, match="corrupt"):
        la.load_policy(path)
