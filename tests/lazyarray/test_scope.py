"""The batching scope: recording, forcing, errors, nesting, threads, stats."""
import asyncio
import gc
import random
import signal
import sys
import threading
import warnings
import weakref

import numpy as np
import pytest

import batching
from tests.signals import raising_at
import lazyarray as la
import lazyarray.scope as scope_module

rng = np.random.default_rng(1)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


W = la.parameter(f32(4, 3), name="W")
b = la.parameter(f32(4), name="b")


def model(x, label):
    h = la.tanh(W @ x + b)
    first, second = la.split(h, 2)
    return la.sum(la.sigmoid(first) * second) - la.log_softmax(h)[label]


def test_batched_equals_eager_and_batches_shared_weights():
    xs = [f32(3) for _ in range(6)]
    eager = [float(model(x, i % 4)) for i, x in enumerate(xs)]
    with la.batching() as scope:
        outs = [model(x, i % 4) for i, x in enumerate(xs)]
        assert all(isinstance(o, la.LazyArray) and o.shape == () for o in outs)
    np.testing.assert_allclose([float(o) for o in outs], eager, rtol=1e-5)
    stats = scope.stats
    assert stats.nodes == 6 * 9  # W @ x + b and log_softmax(h)[label] are one node each
    assert stats.batches == 9 == stats.lower_bound  # every step of the 6 instances in one batch
    assert "affine(W:float32[4,3], float32[3], b:float32[4])" in scope.explain()
    assert set(stats.times) == {"record", "schedule", "plan", "execute", "backward"}
    assert "batches" in str(stats)


def test_futures_alive_at_exit_keep_copies_of_their_own_values():
    """Held by a variable, or only by a reference cycle (a recursive closure, as a tree model's
    ``encode`` makes) that the collector has not reached yet: each keeps its own copy, not a
    view of the scope's arenas, split parts and forced values included."""
    xs = [rng.standard_normal(6).astype(np.float32) for _ in range(5)]

    def model(x):
        kept = []

        def encode(k):      # refers to itself: a cycle, alive until the collector runs
            h = la.tanh(x * k)
            kept.append(h)
            return h if k == 0 else encode(k - 1) + h

        return encode(2), la.split(x, 3), kept, encode

    gc.disable()
    try:
        with la.batching():
            outs = [model(la.array(x)) for x in xs]
            forced = outs[0][0] * 2
            float(la.sum(forced))
        for (total, parts, kept, _), x in zip(outs, xs):
            np.testing.assert_allclose(total.asnumpy(), sum(np.tanh(x * k) for k in range(3)), rtol=1e-5)
            for part, want in zip(parts, np.split(x, 3)):
                np.testing.assert_array_equal(part.asnumpy(), want)
            for h, k in zip(kept, (2, 1, 0)):
                np.testing.assert_allclose(h.asnumpy(), np.tanh(x * k), rtol=1e-5)
            for value in (total, *parts, *kept):
                assert value._value.base is None and value._scope is None
        assert forced._value.base is None
    finally:
        gc.enable()


def test_metadata_known_while_recording():
    with la.batching():
        y = W @ la.array(f32(3))
        assert (y.shape, y.dtype, y.ndim) == ((4,), np.float32, 1)
        assert y.reshape(2, 2).shape == (2, 2) and y.reshape(2, 2).T.shape == (2, 2)
        assert (y > 0).dtype == np.bool_


def test_eager_mode_runs_at_once():
    x = la.array(f32(3))
    y = W @ x
    np.testing.assert_allclose(y.asnumpy(), W.asnumpy() @ x.asnumpy(), rtol=1e-6)
    assert la.current() is None


@pytest.mark.parametrize("call, message", [
    (lambda x: la.split(x, 1.5, axis=1), "sections must be a number of equal parts"),
    (lambda x: la.split(x, 2, axis=1), "does not divide into 2 equal parts"),
    (lambda x: la.pick(x, 1), r"index shape \(\) must be \(2,\)"),
    (lambda x: la.pick_log_softmax(x, 0, axis=0), r"index shape \(\) must be \(3,\)"),
    (lambda x: la.affine(W, x[0], la.array(f32(2, 4))), r"bias of shape \(2, 4\) would broadcast"),
])
def test_eager_mode_rejects_what_a_scope_rejects(call, message):
    """numpy itself accepts these (split points, a broadcasting bias, ...); the same code must
    not run eagerly and then fail once it is batched."""
    x = la.array(f32(2, 3))
    with pytest.raises(la.ShapeError, match=message):
        call(x)
    with la.batching():
        with pytest.raises(la.ShapeError, match=message):
            call(la.array(f32(2, 3)))


def test_a_reused_input_buffer_is_read_as_it_was_at_the_call():
    """Lazy evaluation must not change what an op sees: a numpy buffer refilled between calls
    (as a feature extractor does) is copied when recorded, as numpy operand, la.array and
    cell argument; eagerly each call reads the buffer's contents of its own time."""
    step = la.cell(lambda x: la.tanh(W @ x))
    forms = {"operand": lambda buf: W @ buf, "array": lambda buf: W @ la.array(buf), "cell": step}
    for name, call in forms.items():
        buf = np.empty(3, np.float32)
        eager, batched = [], []
        for t in range(4):
            buf[:] = t - 1.5
            eager.append(call(buf).asnumpy())
        with la.batching():
            for t in range(4):
                buf[:] = t - 1.5
                batched.append(call(buf))
        np.testing.assert_allclose([y.asnumpy() for y in batched], eager, rtol=1e-6, err_msg=name)


def test_numpy_operands_take_the_generated_stub(monkeypatch):
    """Per-node numpy data in an op (``W @ features[t]``) is copied into an input node by the
    generated stub, and numpy scalar constants keyed by type and value, with the same keys as
    the generic path: only each signature's first call goes the generic way, and the fused
    ``W @ x + b`` still fuses."""
    from lazyarray.scope import Scope
    generic = []
    record = Scope.record
    monkeypatch.setattr(Scope, "record", lambda self, op, *a: generic.append(op.name) or record(self, op, *a))
    b = la.parameter(f32(4))
    xs = [f32(3) for _ in range(5)]
    with la.batching() as scope:
        got = []
        for x in xs:
            got.append((W @ x + b, la.tanh(x) * x, la.subtract(2.0, x),
                        la.tanh(x) * np.float32(0.5), np.float64(2.0) * la.tanh(x), la.tanh(x) + np.int8(3)))
            if len(got) == 1:
                generic.clear()         # each signature's first call may go the generic way
        assert generic == []
    for (affine, square, minus, *scaled), x in zip(got, xs):
        for g, want in zip(scaled, (np.tanh(x) * np.float32(0.5), np.float64(2.0) * np.tanh(x), np.tanh(x) + np.int8(3))):
            assert g.dtype == want.dtype
            np.testing.assert_allclose(g.asnumpy(), want, rtol=1e-6)
        np.testing.assert_allclose(affine.asnumpy(), W.asnumpy() @ x + b.asnumpy(), rtol=1e-5)
        np.testing.assert_allclose(square.asnumpy(), np.tanh(x) * x, rtol=1e-6)
        np.testing.assert_allclose(minus.asnumpy(), 2.0 - x, rtol=1e-6)
    assert "affine" in scope.explain()


def test_numpy_integer_ids_and_slices_take_the_generated_stub(monkeypatch):
    """Word ids and labels read from numpy arrays (np.int64 and friends) and basic slices record
    without the generic path after each signature's first call, with eager's values and errors."""
    from lazyarray.scope import Scope
    generic = []
    record = Scope.record
    monkeypatch.setattr(Scope, "record", lambda self, op, *a: generic.append(op.name) or record(self, op, *a))
    E = la.parameter(f32(7, 3))
    ids = np.array([3, 0, 6, 3], np.int64)
    labels = np.array([2, 1, 0, 2], np.uint8)
    with la.batching():
        got = []
        for w, k in zip(ids, labels):
            got.append((E[w], la.log_softmax(E[w])[k], la.pick(E[w], k), E[w][1:], E[w][::-1][0:2]))
            if len(got) == 1:
                generic.clear()         # each signature's first call may go the generic way
        assert generic == []
        with pytest.raises(IndexError):
            E[np.int64(7)]
    for (row, loss, picked, tail, head), w, k in zip(got, ids, labels):
        want = E.asnumpy()[w]
        np.testing.assert_allclose(row.asnumpy(), want)
        np.testing.assert_allclose(loss.asnumpy(), want[k] - np.log(np.exp(want).sum()), rtol=1e-5)
        np.testing.assert_allclose(picked.asnumpy(), want[k])
        np.testing.assert_allclose(tail.asnumpy(), want[1:])
        np.testing.assert_allclose(head.asnumpy(), want[::-1][0:2])


def test_shape_errors_raise_at_the_call_naming_op_and_shapes():
    with la.batching() as scope:
        x = la.array(f32(5))
        with pytest.raises(la.ShapeError, match=r"matmul.*\(4, 3\).*\(5,\)|matmul.*W:float32\[4,3\].*float32\[5\]"):
            W @ x
        with pytest.raises(la.ShapeError, match="split"):
            la.split(x, 2)
        with pytest.raises(la.ShapeError, match="add"):
            x + la.array(f32(3))
        with pytest.raises(IndexError, match="take"):
            la.take(W, 9, axis=0)
        with pytest.raises(IndexError, match="take"):
            la.take(W, 12)              # numpy's default: an index into the flattened array
        bad = la.array(f32(2, 2))
        concrete = la.array(np.ones((2, 2), np.float32))  # made outside the scope's records
        scalar, stacked, other = la.array(np.float32(2)), la.array(f32(2, 3, 4)), la.array(f32(5, 4, 2))
        columns = lambda: (len(scope.graph.sig), len(scope.graph.depth), len(scope.graph.ins))  # noqa: E731
        before = columns()
        with pytest.raises(la.ShapeError):
            la.concatenate([x, bad])
        with pytest.raises(la.ShapeError):
            x + np.ones(2, np.float32)  # the numpy operand's input node is rolled back
        with pytest.raises(la.ShapeError, match=r"matmul: operands must have rank >= 1.*\(5,\) and \(\)"):
            x @ scalar
        with pytest.raises(la.ShapeError, match=r"matmul: batch dimensions of \(2, 3, 4\) and \(5, 4, 2\)"):
            stacked @ other
        assert columns() == before  # nothing half-recorded
        total = la.sum(x) + la.sum(concrete)
    assert float(total) == pytest.approx(float(np.sum(x.asnumpy())) + 4, rel=1e-5)
    with pytest.raises(la.ShapeError, match="matmul"):
        W @ la.array(f32(5))  # eager mode too


def test_forcing_inside_a_scope_flushes_and_recording_continues():
    x = f32(3)
    with la.batching() as scope:
        h = la.tanh(W @ x)
        steps = 0
        while float(la.sum(h)) > -10 and steps < 3:  # value-dependent control flow
            h = la.tanh(W @ la.concatenate([h[:3]]))
            steps += 1
        out = la.sum(h)
    assert scope.stats.flushes == 4
    expected = np.tanh(W.asnumpy() @ x)
    for _ in range(3):
        expected = np.tanh(W.asnumpy() @ expected[:3])
    np.testing.assert_allclose(float(out), expected.sum(), rtol=1e-5)


def test_futures_usable_after_scope_like_arrays():
    x = f32(3)
    with la.batching():
        y = W @ x
    np.testing.assert_allclose(np.asarray(y), W.asnumpy() @ x, rtol=1e-6)
    z = y * 2 + 1  # eager on a finished future
    np.testing.assert_allclose(z.asnumpy(), (W.asnumpy() @ x) * 2 + 1, rtol=1e-6)
    assert y.tolist() == pytest.approx((W.asnumpy() @ x).tolist(), rel=1e-6)
    assert int(la.array(np.int64(3))) == 3 and bool(la.array(np.ones(())))


def test_exception_inside_scope_leaves_nothing_behind():
    with pytest.raises(ZeroDivisionError):
        with la.batching() as failed:
            y = W @ f32(3)
            1 / 0
    assert la.current() is None
    with pytest.raises(la.ScopeError, match="failed with ZeroDivisionError"):
        y.asnumpy()
    with pytest.raises(la.ScopeError):
        with la.batching():
            la.tanh(y)  # a future of the failed scope used in a new one
    with la.batching() as scope:  # the next scope works
        z = la.tanh(W @ f32(3))
    assert z.shape == (4,) and scope.stats.nodes == 3 and failed.graph is None


def test_scopes_nest_and_use_each_others_values():
    x = f32(3)
    with la.batching() as outer:
        a = W @ x
        with la.batching() as inner:
            assert la.current() is inner
            c = la.tanh(a)  # forces the outer scope, then a is an input here
        assert la.current() is outer
        d = c + a
    assert la.current() is None
    np.testing.assert_allclose(d.asnumpy(), np.tanh(W.asnumpy() @ x) + W.asnumpy() @ x, rtol=1e-5)
    assert outer.stats.flushes == 1


def test_scopes_are_thread_local():
    results, errors = {}, []

    def work(k):
        try:
            with la.batching() as scope:
                v = la.sum(W @ np.full(3, k, np.float32))
                assert la.current() is scope
            results[k] = float(v)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    with la.batching():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    for k, v in results.items():
        assert v == pytest.approx(float((W.asnumpy() @ np.full(3, k, np.float32)).sum()), rel=1e-5)


def test_a_future_of_a_scope_recording_in_another_thread_is_refused_until_it_exits():
    """Forcing it would run that scope's graph while its own thread may be appending to it."""
    outcome = {}

    def use(x):
        try:
            with la.batching():
                y = x * 2
            outcome["value"] = y.asnumpy()
        except la.ScopeError as error:
            outcome["error"] = str(error)

    x0 = f32(3)
    with la.batching():
        x = la.tanh(W @ x0)
        t = threading.Thread(target=use, args=(x,))
        t.start()
        t.join()
        assert "still recording in another thread" in outcome.pop("error")
    t = threading.Thread(target=use, args=(x,))
    t.start()
    t.join()
    np.testing.assert_allclose(outcome["value"], 2 * np.tanh(W.asnumpy() @ x0), rtol=1e-5)


def test_asyncio_tasks_holding_scopes_across_awaits_record_into_their_own():
    """Scopes were thread-local: two tasks interleaving on one thread shared one stack, one
    task's ops went into the other's scope, its exit failed and left a zombie scope current."""
    async def worker(delay, k):
        with la.batching() as scope:
            x = la.array(np.full(3, k, np.float32))
            await asyncio.sleep(delay)
            y = la.tanh(W @ x)
            assert y._scope is scope and la.current() is scope
            await asyncio.sleep(delay)
        return y

    async def main():
        return await asyncio.gather(*(worker(d, k) for k, d in enumerate([0.01, 0.02, 0.005])))

    for k, y in enumerate(asyncio.run(main())):
        np.testing.assert_allclose(y.asnumpy(), np.tanh(W.asnumpy() @ np.full(3, k, np.float32)), rtol=1e-6)
    assert la.current() is None and la.tanh(np.ones(2))._scope is None


def test_scopes_left_out_of_order_leave_none_behind():
    """Generators share their caller's context: interleaved, their scopes exit out of order.
    That is refused (ScopeError), and neither scope stays current."""
    def gen():
        with la.batching():
            yield

    a, b = gen(), gen()
    next(a), next(b)
    with pytest.raises(la.ScopeError, match="reverse order"):
        next(a, None)
    next(b, None)
    assert la.current() is None and la.tanh(np.ones(2))._scope is None


def test_another_threads_fused_away_intermediate_is_refused_before_touching_its_graph():
    """``h`` of ``W @ x + b`` (fused into one affine node) used from another thread re-recorded
    itself into the recording thread's graph before refusing."""
    box, ready, resume = {}, threading.Event(), threading.Event()

    def record():
        with la.batching() as s:
            h = W @ la.array(f32(3))
            h + b
            box["h"], box["before"] = h, len(s.graph)
            ready.set()
            resume.wait()
            box["after"] = len(s.graph)

    def use():
        ready.wait()
        try:
            with pytest.raises(la.ScopeError, match="another thread"):
                la.tanh(box["h"])
        finally:
            resume.set()

    threads = [threading.Thread(target=record), threading.Thread(target=use)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert box["after"] == box["before"]


def _in_hook(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "_unwound":
            return True
        frame = frame.f_back
    return False


def _interrupted_scope(k, x):
    """A scope (a forced flush inside, a fresh cell traced, the scope's exit) interrupted by
    KeyboardInterrupt at the k-th point of lazyarray/scope.py where CPython would raise a
    signal's exception: a function's start, after a C call returns, after a loop's jump back
    (-1: never); not inside the exit hook's callback, where Python discards exceptions (it
    retries instead). Returns (values, points seen)."""
    cell = la.cell(lambda v: la.tanh(W @ v + b))
    tracer, count = raising_at(k, scope_module.__file__, _in_hook)

    out = []
    sys.settrace(tracer)
    try:
        with la.batching():
            y = la.sum(la.tanh(W @ la.array(x) + b))
            out.append(float(y))
            out.append(cell(la.array(x)))
    except KeyboardInterrupt:
        return out, count[0]
    finally:
        sys.settrace(None)
    return [out[0], out[1].asnumpy()], count[0]


def test_an_interrupt_anywhere_in_a_scope_leaves_no_state_and_no_wrong_value():
    """KeyboardInterrupt at the start of ``__exit__`` left the scope current forever (later
    eager calls were recorded into it); inside ``discard`` it left the signature table's count
    of active scopes raised. Here it arrives at every line of the scope machinery in turn."""
    x = f32(3)
    want = [float(np.tanh(W.asnumpy() @ x + b.asnumpy()).sum()), np.tanh(W.asnumpy() @ x + b.asnumpy())]
    thresholds = gc.get_threshold()
    _, lines = _interrupted_scope(-1, x)
    assert lines > 50
    for k in range(1, lines + 1):
        got, _ = _interrupted_scope(k, x)
        assert la.current() is None, k
        assert gc.get_threshold() == thresholds, k    # the collector's setting is not left raised
        assert la.tanh(np.ones(2))._scope is None, k
        for g, w in zip(got, want):   # what completed is right; the rest raises ScopeError
            try:
                np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5)
            except la.ScopeError:
                pass
    got, _ = _interrupted_scope(-1, x)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")   # one landing in a gc callback
def test_interrupts_from_a_timer_over_many_scopes_leave_no_state():
    """Signals at random times (SIGALRM raising KeyboardInterrupt, as Ctrl-C does)."""
    def interrupt(*_):
        raise KeyboardInterrupt

    x, hits = f32(3), 0
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        for i in range(300):
            try:
                try:
                    signal.setitimer(signal.ITIMER_REAL, random.Random(i).uniform(1e-5, 3e-4))
                    with la.batching():
                        y = la.sum(la.tanh(W @ la.array(x) + b))
                        float(y)
                        z = la.exp(y)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)     # a signal handled here is caught too
                np.testing.assert_allclose(float(z), np.exp(np.tanh(W.asnumpy() @ x + b.asnumpy()).sum()),
                                           rtol=1e-5)
            except KeyboardInterrupt:
                hits += 1
            assert la.current() is None
    finally:
        signal.signal(signal.SIGALRM, old)
    assert hits > 10


def test_scope_cannot_be_reentered():
    scope = la.batching()
    with scope:
        pass
    with pytest.raises(la.ScopeError):
        with scope:
            pass


def test_bad_operands_are_reported():
    with la.batching():
        x = la.array(f32(3))
        with pytest.raises(TypeError, match="indices"):
            x[la.array(np.int64(1))]
        for flag in (True, np.False_):      # numpy's boolean scalar index (a new axis, or none)
            with pytest.raises(TypeError, match="got bool"):
                x[flag]
        with pytest.raises(TypeError, match="non-empty sequence"):
            la.stack(x)
        with pytest.raises(TypeError, match="integers"):
            la.take(W, 1.5)
    with pytest.raises(ValueError, match="unknown scheduler"):
        la.batching(scheduler="nope")
    with pytest.raises(ValueError, match="unknown backend"):
        la.batching(backend="tpu")
    with pytest.raises(TypeError, match="True or False"):
        la.batching(memplan="no")
    with pytest.raises(TypeError, match="takes a function"):
        la.cell(3)


@pytest.mark.parametrize("value", [np.array([1, None], dtype=object), np.array(["a", "b"]),
                                   np.array(["2026-11-23"], dtype="datetime64[D]")])
def test_non_numeric_data_is_refused_where_it_enters(value):
    """Inference runs on dummy zeros, so an object array would only fail (or compute something
    else) when the scope runs: refused at la.array, la.parameter and as an operand instead."""
    for enter in (la.array, la.parameter):
        with pytest.raises(TypeError, match="numeric arrays"):
            enter(value)
    with la.batching():
        with pytest.raises(TypeError, match="numeric arrays"):
            la.array(f32(2)) + value
        with pytest.raises(TypeError, match="numeric arrays"):
            la.array(value)
        y = la.array(f32(2)) * 2            # the scope goes on
    assert y.shape == (2,)


def test_explain_environment_switch(monkeypatch, capsys):
    monkeypatch.setenv("LAZYARRAY_EXPLAIN", "1")
    with la.batching():
        la.tanh(la.array(f32(2)))
    assert "tanh(float32[2])" in capsys.readouterr().out


def test_split_parts_and_slices_alias_memory():
    xs = [f32(6) for _ in range(5)]
    with la.batching() as scope:
        parts = [la.split(la.tanh(x), 3) for x in xs]
        mids = [la.sigmoid(p[1]) for p in parts]
        tails = [la.tanh(x)[2:] for x in xs]
    for x, p, m, t in zip(xs, parts, mids, tails):
        np.testing.assert_allclose(m.asnumpy(), 1 / (1 + np.exp(-np.tanh(x)[2:4])), rtol=1e-5)
        np.testing.assert_allclose(p[2].asnumpy(), np.tanh(x)[4:], rtol=1e-6)
        np.testing.assert_allclose(t.asnumpy(), np.tanh(x)[2:], rtol=1e-6)
    # input stack, one tanh batch (both tanh calls per x) and one sigmoid batch (reading the
    # split parts in place): split and slicing ran no kernel and nothing was gathered
    assert scope.stats.kernels == 3


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 9, 12])
def test_split_into_k_parts_gives_k_handles_in_order(k):
    """Part handles come from written-out makers up to 8 parts, a loop beyond."""
    xs = [f32(2 * k) for _ in range(3)]
    with la.batching():
        parts = [la.split(la.tanh(x), k) for x in xs]
        assert all(len(p) == k for p in parts)
    for x, p in zip(xs, parts):
        for got, want in zip(p, np.split(np.tanh(x), k)):
            assert got.shape == want.shape
            np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)


def test_a_split_into_more_parts_than_a_reference_numbers_is_refused_at_the_call():
    """Part numbers are the low 16 bits of a reference: past 65,535 parts they spilled into the
    node id, and the last part read another node's value."""
    n = 1 << 16
    x = np.arange(n, dtype=np.float32)
    with la.batching():
        parts = la.split(la.array(x[1:]), n - 1)        # the most a node can have
        with pytest.raises(la.ShapeError, match="split.*65,535"):
            la.split(la.array(x), n)
        la.tanh(la.array(np.ones(3, np.float32)))       # a later node: recording goes on
    assert parts[-1].item() == n - 1 and parts[0].item() == 1

    @la.cell
    def many(v):
        return tuple(la.split(v, n))
    with la.batching():
        with pytest.raises(la.ShapeError, match="65,535"):
            many(la.array(x))


def test_record_returns_the_graph_without_running_it():
    def fn(xs):
        return [la.tanh(W @ x) for x in xs]

    view = la.record(fn, [f32(3) for _ in range(4)])
    assert len(view) == 3 * 4 and view.ntypes == 3
    assert la.current() is None
    with la.batching() as scope:  # the process is in a clean state afterwards
        fn([f32(3)])
    assert scope.stats.nodes == 3

    def forcing(xs):                # value-dependent control flow runs the part before it
        ys = fn(xs)
        return [y * 2 for y in ys] if float(la.sum(ys[0])) > -10 else ys
    view = la.record(forcing, [f32(3) for _ in range(4)])
    assert len(view) == 3 * 4 + 1 + 4 and view.ntypes == 5     # the whole graph, not its tail


class _OneByOne:
    """A scheduler of the documented interface: every node alone, in recording order."""

    def schedule(self, view):
        return [np.array([i]) for i in range(len(view))]


class _Reversed(_OneByOne):
    def schedule(self, view):
        return super().schedule(view)[::-1]       # consumers before their inputs


@pytest.mark.parametrize("broken", [
    lambda view: [np.arange(len(view))],                                  # mixes types
    lambda view: _Reversed().schedule(view),                              # not ready
    lambda view: _OneByOne().schedule(view)[:-1],                         # a node never runs
    lambda view: _OneByOne().schedule(view) + [np.array([0])],            # a node twice
    lambda view: [np.array([-1])] + _OneByOne().schedule(view)[:-1],      # -1 for the last node
    lambda view: [b.astype(float) for b in _OneByOne().schedule(view)],   # not node ids
    lambda view: [[]] + _OneByOne().schedule(view),                       # an empty batch
])
def test_a_custom_schedulers_schedule_is_checked(broken):
    """Built-in schedulers are tested; any other object's schedule is checked when it is made,
    since running a wrong one would read values not computed yet."""
    x = f32(3)
    with la.batching(scheduler=_OneByOne()):
        y = model(x, 1)
    assert float(y) == pytest.approx(float(model(x, 1)), rel=1e-5)
    bad = type("Broken", (), {"schedule": lambda self, view: broken(view)})()
    with pytest.raises(batching.InvalidSchedule, match="scheduler .*Broken"):
        with la.batching(scheduler=bad):
            y = model(x, 1)
    with pytest.raises(la.ScopeError, match="failed"):
        float(y)


def test_a_custom_scheduler_may_return_lists():
    lists = type("Lists", (), {"schedule": lambda self, view: [b.tolist() for b in _OneByOne().schedule(view)]})()
    x = f32(3)
    with la.batching(scheduler=lists):
        y = model(x, 1)
    assert float(y) == pytest.approx(float(model(x, 1)), rel=1e-5)


class _Bundle:
    def __init__(self, W):
        self.W = W


@la.cell
def _through_bundle(p, x):
    return la.tanh(p.W @ x)


def _closing_over(p):
    return la.cell(lambda x: la.tanh(p.W @ x))


@pytest.mark.parametrize("style", ["op", "closure", "argument", "bundle", "closed-over bundle"])
def test_a_dropped_model_is_released(style, monkeypatch):
    """The signature table holds the weights of what it interned. Once the program has dropped
    parameters worth more than a bound (here: any), the next scope starts a fresh table, so a
    notebook that re-creates its model does not keep every model's weights alive; the table
    itself holds no handle, cell or bundle that would keep one from being dropped."""
    from lazyarray import scope as S
    monkeypatch.setattr(S, "_MAX_DEAD", (0, 1 << 40))

    def model():
        value = f32(8, 3)
        W = la.parameter(value)
        fn = {"op": lambda x: W @ x,
              "closure": la.cell(lambda x: la.tanh(W @ x)),
              "argument": lambda x, c=la.cell(lambda M, x: M @ x): c(W, x),
              "bundle": lambda x, p=_Bundle(W): _through_bundle(p, x),
              "closed-over bundle": _closing_over(_Bundle(W))}[style]
        x = f32(3)
        with la.batching():
            y = fn(x)
        np.testing.assert_allclose(y.asnumpy(), value @ x if style in ("op", "argument")
                                   else np.tanh(value @ x), rtol=1e-5)
        return weakref.ref(value)

    first = model()
    model()              # the same code with another model: what recorders memoise moves on
    gc.collect()
    with la.batching():
        pass
    gc.collect()
    assert first() is None


def test_dropped_parameters_are_released_while_another_thread_holds_a_scope_open(monkeypatch):
    """The table was replaced only when no scope was open in any thread: a server thread that
    keeps a scope open made the parameters every other scope dropped pile up without bound."""
    from lazyarray import scope as S
    monkeypatch.setattr(S, "_MAX_DEAD", (4096, 1 << 20))
    opened, stop = threading.Event(), threading.Event()

    def hold():
        with la.batching():
            la.tanh(la.array(np.ones(3, np.float32)))
            opened.set()
            stop.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    opened.wait()
    try:
        alive = []
        for _ in range(24):
            value, x = f32(512, 256), f32(256)     # 512 kB a model
            W = la.parameter(value)
            with la.batching():
                y = W @ la.array(x)
            np.testing.assert_allclose(y.asnumpy(), value @ x, rtol=1e-4, atol=1e-5)
            alive.append(weakref.ref(value))
            del W, value, y
            gc.collect()
            assert S.SIGNATURES.dead[1] <= (1 << 20) + 512 * 256 * 4
        # what the open scope's table took before the first reset (a bound's worth), and the
        # current table's: not every model the loop made
        assert sum(r() is not None for r in alive) <= 6
    finally:
        stop.set()
        holder.join()


def test_the_signature_table_is_bounded_in_bytes(monkeypatch):
    """It was bounded by count (200,000 signatures, ~2 GB of them): a program minting a
    signature per scope (an annealed constant, a new trace) held that much before a reset."""
    from lazyarray import scope as S
    monkeypatch.setattr(S, "_MAX_BYTES", 200_000)
    W = la.parameter(f32(8, 16))
    step = la.cell(lambda h, x, t: la.tanh(W @ la.concatenate([h, x]) / t))
    xs = [f32(8) for _ in range(5)]
    generations, peak = set(), 0
    for s in range(60):
        with la.batching():
            h = la.array(np.zeros(8, np.float32))
            for x in xs:
                h = step(h, x, 1.0 + 1e-6 * s)      # a new constant: a new trace per scope
                h = la.tanh(h / (2.0 + 1e-6 * s))   # and a new op signature
        generations.add(S.SIGNATURES.table.generation)
        peak = max(peak, S.SIGNATURES.bytes)
        want = np.zeros(8, np.float32)
        for x in xs:
            want = np.tanh(np.tanh(W.asnumpy() @ np.concatenate([want, x]) / np.float32(1.0 + 1e-6 * s))
                           / np.float32(2.0 + 1e-6 * s))
        np.testing.assert_allclose(h.asnumpy(), want, rtol=1e-5, atol=1e-6)
    assert len(generations) > 2 and peak < 2 * 200_000


def test_negative_zero_constant_is_not_positive_zero():
    x = np.array([1.0, 2.0], dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        with la.batching():
            pos = la.array(x) / 0.0
            neg = la.array(x) / -0.0
        assert np.asarray(pos).tolist() == [np.inf, np.inf]
        assert np.asarray(neg).tolist() == [-np.inf, -np.inf]          # was [inf, inf]
        with la.batching():                                              # a later scope, too
            neg2 = la.array(x) / np.float64(-0.0)
            neg3 = la.array(x) * complex(1, 0) / complex(-0.0, 0.0)
        assert np.asarray(neg2).tolist() == [-np.inf, -np.inf]
        np.testing.assert_array_equal(np.asarray(neg3), np.asarray(la.array(x) * complex(1, 0) / complex(-0.0, 0.0)))


@pytest.mark.parametrize("call, good, bad", [
    ("sum", 1, 1.0), ("sum", 1, True), ("max", 1, np.float64(1.0)), ("log_softmax", 0, 0.0),
    ("log_softmax", 0, False), ("stack", 1, 1.0), ("concatenate", 1, True), ("take", 1, 1.0),
])
def test_float_or_bool_attribute_refused_after_int_one_was_recorded(call, good, bad):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    fns = {
        "sum": lambda a, v: la.sum(a, axis=v), "max": lambda a, v: la.max(a, axis=v),
        "log_softmax": lambda a, v: la.log_softmax(a, axis=v),
        "stack": lambda a, v: la.stack([a, a], axis=v), "concatenate": lambda a, v: la.concatenate([a, a], axis=v),
        "take": lambda a, v: la.take(a, 1, axis=v),
    }
    fn = fns[call]
    with pytest.raises(la.ShapeError):
        fn(la.array(x), bad)                                             # eager refuses it
    with la.batching():
        fn(la.array(x), good)                                            # interns the int signature
    with pytest.raises(la.ShapeError):
        with la.batching():
            fn(la.array(x), bad)                                         # was accepted, as axis=good


def test_float_slice_bound_refused_after_int_one_was_recorded():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with la.batching():
        la.array(x)[0:2]
    with pytest.raises(la.ShapeError):
        with la.batching():
            la.array(x)[0:2.0]


def test_a_value_from_outside_the_scope_is_read_as_of_its_first_use():
    """Like a numpy operand: mutating it afterwards (its memory, through np.asarray) does not
    change what the op recorded before computes."""
    with la.batching():
        a = la.array(f32(3)) + 0.0
    before = np.array(a)
    with la.batching():
        y = a * 2
        np.asarray(a)[:] = 5
    np.testing.assert_allclose(np.asarray(y), before * 2)


def _failing_force(scope_kwargs=None):
    """A scope in which forcing a value fails (log(0) under np.errstate(all="raise")) and the
    block catches the error and goes on, as value-dependent code may."""
    x0 = np.array([0.0, 1.0], np.float32)
    with np.errstate(all="raise"):
        scope = la.batching(**(scope_kwargs or {}))
        scope.__enter__()
        y = la.log(la.array(x0))
        with pytest.raises(FloatingPointError):
            float(la.sum(y))
    return scope, y


@pytest.mark.parametrize("then", ["op", "array", "cell", "nothing"])
def test_recording_after_a_failed_forced_flush_raises_scope_error_and_so_does_leaving(then):
    W = la.parameter(np.eye(2, dtype=np.float32))
    body = la.cell(lambda x: la.tanh(W @ x))
    scope, y = _failing_force()
    try:
        if then != "nothing":
            with pytest.raises(la.ScopeError, match="FloatingPointError"):
                if then == "op":
                    la.tanh(y)
                elif then == "array":
                    la.array(np.ones(2, np.float32))
                else:
                    body(np.ones(2, np.float32))
    finally:
        with pytest.raises(la.ScopeError, match="FloatingPointError"):
            scope.__exit__(None, None, None)
    assert la.current() is None
    with pytest.raises(la.ScopeError):
        y.asnumpy()
    x = np.array([0.5, 2.0], np.float32)
    with la.batching():
        z = la.log(la.array(x)) + body(x)
    np.testing.assert_allclose(z.asnumpy(), np.log(x) + np.tanh(x), rtol=1e-6)


def test_la_record_of_a_function_whose_forced_flush_failed_raises_scope_error():
    def fn(_):
        with np.errstate(all="raise"):
            y = la.log(la.array(np.zeros(2, np.float32)))
            try:
                float(la.sum(y))
            except FloatingPointError:
                pass
    with pytest.raises(la.ScopeError, match="FloatingPointError"):
        la.record(fn, None)
    assert la.current() is None


def _full(*shape, fill=None):
    return np.full(shape, fill, np.float32) if fill is not None else np.ones(shape, np.float32)


# -- scopes of several threads intern signatures into one table
def test_threads_recording_new_signatures_concurrently():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for trial in range(40):
            W = la.parameter(np.linspace(-1, 1, 9).reshape(3, 3).astype(np.float32))

            @la.cell
            def step(x, st, c):
                h, cc = st
                return la.tanh(W @ x + h * c), cc * c

            def prog(seed):
                rnd = random.Random(seed)
                h, c = la.array(_full(3, fill=0.0)), la.array(_full(3))
                out = []
                for t in range(30):
                    x = rnd.choice([_full(3, fill=t / 10), np.full(3, t / 10, ">f4"), np.full(3, t / 10)])
                    h, c = step(x, (h, c), rnd.choice([0.5, np.float32(0.5), -0.0, 2.0, True]))
                    out += [h, W @ h + rnd.choice([1.0, np.float16(2), np.ones(3, np.float32)])]
                return out

            seeds = range(trial * 10, trial * 10 + 6)
            eager = {s: [o.asnumpy() for o in prog(s)] for s in seeds}
            errors, barrier = [], threading.Barrier(len(seeds))

            def worker(s):
                try:
                    barrier.wait()
                    with la.batching():
                        got = prog(s)
                    for g, e in zip(got, eager[s]):
                        np.testing.assert_allclose(g.asnumpy(), e, rtol=1e-4, atol=1e-6)
                except BaseException as error:   # ValueError: operands could not be broadcast (n,) (n+k,)
                    errors.append(error)

            threads = [threading.Thread(target=worker, args=(s,)) for s in seeds]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, errors[0]
    finally:
        sys.setswitchinterval(old)


# -- la.stack / la.concatenate of a LazyArray
def test_stack_of_a_lazyarray_refuses_alike_and_leaves_no_nodes():
    A = np.arange(6, dtype=np.float32).reshape(3, 2)
    for warm in (False, True):
        with la.batching() as scope:
            x = la.array(A) * 1
            if warm:        # an entry for stacking three rows of x's row class exists
                la.stack([x[0], x[1], x[2]], axis=1)
            nodes = len(scope._sig)
            with pytest.raises(TypeError, match="sequence of arrays"):
                la.stack(x, axis=1)     # succeeded when warm, else TypeError with 3 take nodes left
            assert len(scope._sig) == nodes
    with pytest.raises(TypeError, match="sequence of arrays"):
        la.stack(la.array(A), axis=1)   # eager as in a scope


# -- a float subclass's -0.0
class _F(float):
    pass


def test_a_float_subclass_negative_zero_is_not_its_zero():
    x = _full(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with la.batching():
            a, b = la.array(x) / _F(0.0), la.array(x) / _F(-0.0)
        assert (a.asnumpy() == np.inf).all()
        assert (b.asnumpy() == -np.inf).all()       # ran x / 0.0: +inf


def test_an_empty_list_of_ids_and_a_data_dependent_kernel_error_behave_as_eagerly():
    """``E[[]]`` was refused in a scope (numpy reads [] as integers); an integer to a negative
    power surfaced at the flush as a bare numpy ValueError naming no op."""
    E = la.parameter(f32(10, 4), name="E")
    with la.batching():
        empty, one = E[[]], E[[3]]
    assert empty.shape == (0, 4) == E[[]].shape
    np.testing.assert_array_equal(one.asnumpy(), E.asnumpy()[[3]])
    a, b = np.array([2, 3]), np.array([-1, 1])
    with pytest.raises(la.ShapeError, match="power.*negative integer powers"):
        la.power(la.array(a), la.array(b))
    with pytest.raises(la.ShapeError, match="power.*negative integer powers"):
        with la.batching():
            la.tanh(la.array(np.ones(3)))
            la.power(la.array(a), la.array(b))
    assert la.current() is None


@pytest.mark.parametrize("join", [la.stack, la.concatenate])
def test_an_empty_join_is_the_same_error_eagerly_and_in_a_scope(join):
    """``la.stack([])`` was a ShapeError eagerly and a TypeError in a scope."""
    with pytest.raises(la.ShapeError, match="need at least one array") as eager:
        join([])
    with la.batching():
        with pytest.raises(la.ShapeError, match="need at least one array") as batched:
            join([])
    assert str(eager.value) == str(batched.value)


def test_a_strict_scope_names_the_line_that_forced_a_flush(monkeypatch):
    x, x3 = la.array(f32(3)), f32(3)
    with la.batching(strict=True) as scope:
        y = la.tanh(W @ x3)
        with pytest.raises(la.ScopeError, match=r"strict scope: forcing a value at .*test_scope.py:\d+ \(float\(y\)\)"):
            float(y)
        z = scope.map(lambda s: float(la.sum(la.tanh(x * s))), [1.0, 2.0])   # map's flushes are its design
    np.testing.assert_allclose(y.asnumpy(), np.tanh(W.asnumpy() @ x3), rtol=1e-6)
    assert len(z) == 2
    monkeypatch.setenv("LAZYARRAY_STRICT", "1")
    with la.batching():
        with pytest.raises(la.ScopeError, match="strict scope"):
            la.sum(la.tanh(x)).item()
