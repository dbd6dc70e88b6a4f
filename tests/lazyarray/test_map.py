"""``scope.map``: per-instance code that forces values runs as one task per instance; the
scope flushes once when every task waits, so forcing batches across instances."""
import threading

import numpy as np
import pytest

import lazyarray as la

rng = np.random.default_rng(11)
W = la.parameter((rng.standard_normal((4, 4)) * 0.5).astype(np.float32), name="W_map")
step_cell = la.cell(lambda x: la.tanh(W @ x) + 1)


def walk(seed, cell=False, limit=12):
    """Steps until the sum passes a threshold: the number of steps depends on the values."""
    x = la.array(np.full(4, seed, np.float32) * 0.05 - 0.3)
    steps = 0
    while float(la.sum(x)) < 3.5 + 0.1 * seed and steps < limit:
        x = step_cell(x) if cell else la.tanh(W @ x) + 1
        steps += 1
    return steps, x


@pytest.mark.parametrize("scheduler", ["depth", "agenda", "sufficient"])
@pytest.mark.parametrize("cell", [False, True], ids=["ops", "cells"])
def test_map_equals_eager_and_flushes_once_per_step_of_the_longest_task(scheduler, cell):
    eager = [walk(s, cell) for s in range(8)]
    with la.batching(scheduler=scheduler) as scope:
        got = scope.map(lambda s: walk(s, cell), range(8))
    assert [g[0] for g in got] == [e[0] for e in eager]
    for (_, g), (_, e) in zip(got, eager):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5)
    longest = max(e[0] for e in eager)
    assert scope.stats.flushes == longest + 1           # every task's checks of one step in one flush
    with la.batching() as plain:
        [walk(s, cell) for s in range(8)]
    assert plain.stats.flushes == sum(e[0] + 1 for e in eager)


def test_plain_code_runs_as_a_loop_and_results_keep_their_order():
    with la.batching() as scope:
        got = scope.map(lambda s: la.tanh(W @ np.full(4, s, np.float32)), [3, 1, 2])
    assert scope.stats.flushes == 0
    for g, s in zip(got, [3, 1, 2]):
        np.testing.assert_allclose(g.asnumpy(), np.tanh(W.asnumpy() @ np.full(4, s, np.float32)), rtol=1e-6)


def test_a_task_that_raises_ends_the_others_and_fails_the_scope_cleanly():
    ended = []

    def task(i):
        try:
            x = la.array(np.ones(4, np.float32))
            float(la.sum(x))                 # every task waits once
            if i == 2:
                raise ValueError("bad instance")
            float(la.sum(la.tanh(W @ x)))    # the others wait again: ended while waiting
            return i
        finally:
            ended.append(i)

    with pytest.raises(ValueError, match="bad instance") as info:
        with la.batching():
            la.current().map(task, range(5))
    assert info.value.instance == 2 and "instance 2" in str(info.value.__notes__)
    assert sorted(ended) == [0, 1, 2, 3, 4] and la.current() is None
    assert la.tanh(np.ones(2))._scope is None


def test_gradients_flow_through_tasks_as_eagerly():
    def loss(seed):
        steps, x = walk(seed)
        return la.sum(x * x)

    total = la.sum(la.stack([loss(s) for s in range(6)]))
    total.backward()
    eager, W.grad = W.grad, None
    with la.batching() as scope:
        total = la.sum(la.stack(scope.map(loss, range(6))))
        total.backward()
    np.testing.assert_allclose(W.grad, eager, rtol=1e-4, atol=1e-6)
    W.grad = None


def test_tasks_may_open_scopes_of_their_own_and_map_runs_in_threads():
    def task(s):
        with la.batching():                 # an inner scope: flushes on its own
            inner = la.tanh(W @ np.full(4, s, np.float32))
            first = float(la.sum(inner))
        return first + float(la.sum(la.tanh(W @ la.array(np.full(4, s, np.float32)))))

    want = [2 * float(np.tanh(W.asnumpy() @ np.full(4, s, np.float32)).sum()) for s in range(4)]
    out = {}

    def run(k):
        with la.batching() as scope:
            out[k] = scope.map(task, range(4))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        np.testing.assert_allclose(out[k], want, rtol=1e-5)


def test_map_is_refused_where_it_cannot_work():
    with pytest.raises(la.ScopeError, match="active scope"):
        scope = la.batching()
        scope.map(walk, [1])
    with la.batching() as scope:
        with pytest.raises(la.ScopeError, match="inside a task"):
            scope.map(lambda s: scope.map(walk, [s]), [1])
