"""Per-call costs (``python -m benchmarks --micro``): recording an op in a scope through
``la.<op>`` and through numpy's dispatch (``np.tanh(x)`` on a LazyArray), an eager op against
plain numpy, and the cost of forcing a value after P recorded nodes (a value-dependent loop
forces once per step: that cost must not grow with P); then two process-wide settings a scope
makes, each against the scope without it: the collector's raised threshold
(``lazyarray.collector``) and one BLAS thread in flushes (``lazyarray.threads``; run with
``--threads 2`` or more to see the BLAS rule against the threads a user's process has).
Medians of interleaved repeats."""
from __future__ import annotations

import contextlib
import statistics
import sys
import time

import numpy as np
from threadpoolctl import threadpool_info

import lazyarray as la
from lazyarray import collector, scope as scope_module
from lazyarray.workloads import WORKLOADS

CALLS = 20_000


def _per_call(fn, repeats):
    """ns per call of ``fn(n)`` (which makes n calls), median over repeats."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(CALLS)
        times.append((time.perf_counter() - start) / CALLS * 1e9)
    return statistics.median(times)


def recording(H=128, repeats=7, out=sys.stdout):
    x0 = np.ones(H, np.float32)
    W = la.parameter(np.eye(H, dtype=np.float32))
    b = la.parameter(np.zeros(H, np.float32))

    def in_scope(body):
        def run(n):
            with la.no_grad(), la.batching() as scope:
                x = la.array(x0)
                for _ in range(n):
                    body(x)
                scope.discard()     # recording only: nothing runs
        return run

    def eager(body):
        def run(n):
            with la.no_grad():
                x = la.array(x0)
                for _ in range(n):
                    body(x)
        return run

    def plain(n):
        for _ in range(n):
            np.tanh(x0)

    cases = {
        "scope: la.tanh(x)": in_scope(la.tanh),
        "scope: np.tanh(x)": in_scope(np.tanh),
        "scope: x + 1.0": in_scope(lambda x: x + 1.0),
        "scope: W @ x + b": in_scope(lambda x: W @ x + b),
        "eager: la.tanh(x)": eager(la.tanh),
        "plain numpy: np.tanh(x0)": plain,
    }
    got = {name: [] for name in cases}
    for _ in range(repeats):            # interleaved: every case sees the same machine state
        for name, fn in cases.items():
            got[name].append(_per_call(fn, 1))
    print(f"\nPer-call cost, H={H}, {CALLS:,} calls, median of {repeats} (ns per call)", file=out)
    for name, values in got.items():
        print(f"  {name:<28}{statistics.median(values):>9.0f}", file=out)
    ratio = statistics.median(got["scope: np.tanh(x)"]) / statistics.median(got["scope: la.tanh(x)"])
    print(f"  np.tanh / la.tanh in a scope: {ratio:.2f}x", file=out)


def forcing(prefixes=(1_000, 10_000, 40_000, 160_000), rounds=100, out=sys.stdout):
    W = la.parameter(np.eye(8, dtype=np.float32))
    x0 = np.ones(8, np.float32)
    print(f"\nForcing after P recorded nodes: {rounds} rounds of (2 new nodes, one forced value)", file=out)
    for P in prefixes:
        with la.no_grad(), la.batching() as scope:
            ys = [W @ la.array(x0) for _ in range(P // 2)]
            float(la.sum(ys[0]))
            y = la.array(x0)
            start = time.perf_counter()
            for _ in range(rounds):
                y = la.tanh(W @ y)
                float(la.sum(y))
            per = (time.perf_counter() - start) / rounds
        print(f"  P = {P:>7,}: {per * 1e3:6.3f} ms per force ({scope.stats.flushes} flushes)", file=out)


def _scope_ms(w, params, trees, cells, repeats, variants):
    """Median ms of a scope of ``trees`` under each variant (a context manager), interleaved."""
    times = {name: [] for name in variants}
    for _ in range(repeats):
        for name, setting in variants.items():
            with setting():
                start = time.perf_counter()
                with la.no_grad(), la.batching(scheduler="agenda"):
                    loss = w.scope_loss(params, trees, cells=cells)
                float(loss)
                times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


@contextlib.contextmanager
def _young(n):
    saved, collector.YOUNG = collector.YOUNG, n
    try:
        yield
    finally:
        collector.YOUNG = saved


@contextlib.contextmanager
def _blas_as_set():
    saved, scope_module.one_blas_thread = scope_module.one_blas_thread, contextlib.nullcontext
    try:
        yield
    finally:
        scope_module.one_blas_thread = saved


def settings(H=128, instances=64, repeats=5, out=sys.stdout):
    w = WORKLOADS["treelstm"]
    params = w.init(H, seed=0).lazy()
    trees = w.data(instances, seed=0)
    blas = max((i.get("num_threads", 1) for i in threadpool_info() if i.get("user_api") == "blas"), default=1)
    print(f"\nA scope's process-wide settings, TreeLSTM H={H}, {instances} trees, agenda, median of {repeats} "
          "(ms per scope)", file=out)
    print(f"  {'':<8}{'collector at 700':>18}{'at ' + format(collector.YOUNG, ','):>14}"
          f"{'BLAS threads ' + str(blas):>18}{'one in flushes':>16}", file=out)
    for cells in (False, True):
        young = _scope_ms(w, params, trees, cells, repeats, {"700": lambda: _young(700),
                                                             "raised": contextlib.nullcontext})
        threads = _scope_ms(w, params, trees, cells, repeats, {"as set": _blas_as_set,
                                                               "one": contextlib.nullcontext})
        print(f"  {'cells' if cells else 'ops':<8}{young['700']:>18.1f}{young['raised']:>14.1f}"
              f"{threads['as set']:>18.1f}{threads['one']:>16.1f}", file=out)


def main(out=sys.stdout) -> int:
    recording(out=out)
    forcing(out=out)
    settings(out=out)
    return 0
