"""Per-call costs (``python -m benchmarks --micro``): recording an op in a scope through
``la.<op>`` and through numpy's dispatch (``np.tanh(x)`` on a LazyArray), an eager op against
plain numpy, and the cost of forcing a value after P recorded nodes (a value-dependent loop
forces once per step: that cost must not grow with P). Medians of interleaved repeats."""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import lazyarray as la

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


def main(out=sys.stdout) -> int:
    recording(out=out)
    forcing(out=out)
    return 0
