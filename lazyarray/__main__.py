"""``python -m lazyarray demo``: the TreeLSTM of WORKLOADS.md on bundled SST test trees, eager
vs batched, printing loss agreement, batches against the lower bound, and trees per second."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import lazyarray as la
from lazyarray.threads import reexec_with_blas_threads
from lazyarray.workloads import WORKLOADS


def _best(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def demo(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lazyarray demo", description=__doc__)
    parser.add_argument("--trees", type=int, default=64, help="trees per batching scope")
    parser.add_argument("--hidden", type=int, default=128, help="hidden size H")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (best is shown)")
    parser.add_argument("--explain", action="store_true", help="print the agenda schedule per signature")
    args = parser.parse_args(argv)

    w = WORKLOADS["treelstm"]
    params = w.init(H=args.hidden, seed=0)
    lazy = params.lazy()
    trees = w.data(args.trees, seed=0)
    nodes = sum(t.size for t in trees) if hasattr(trees[0], "size") else None
    print(f"TreeLSTM, H={args.hidden}, {args.trees} SST test trees per scope"
          + (f" ({nodes} tree nodes)" if nodes else "") + ", 1 BLAS thread")

    rows = []
    t_eager, eager = _best(lambda: float(w.scope_loss(lazy, trees)), args.repeats)
    rows.append(("eager (same code, no scope)", eager, t_eager, None))
    t_hand, hand = _best(lambda: float(w.hand["levels"](params, trees)), args.repeats)
    rows.append(("hand-batched numpy (levels)", hand, t_hand, None))
    scopes = {}
    for scheduler in ("depth", "agenda"):
        def run():
            with la.batching(scheduler=scheduler) as scope:
                total = w.scope_loss(lazy, trees)
            scopes[scheduler] = scope
            return float(total)
        t, value = _best(run, args.repeats)
        rows.append((f"lazyarray, {scheduler} scheduler", value, t, scopes[scheduler].stats))

    print(f"\n{'':32} {'loss':>14} {'trees/s':>9} {'vs eager':>8} {'batches':>8} {'lower bd':>8} {'kernels':>8}")
    for name, value, t, stats in rows:
        extra = f" {stats.batches:>8} {stats.lower_bound:>8} {stats.kernels:>8}" if stats else ""
        print(f"{name:32} {value:>14.4f} {args.trees / t:>9.0f} {t_eager / t:>7.2f}x{extra}")
    agree = all(np.isclose(v, eager, rtol=1e-4) for _, v, _, _ in rows)
    print(f"\nlosses agree with eager (rtol 1e-4): {'yes' if agree else 'NO'}")
    stats = scopes["agenda"].stats
    ms = {k: v * 1e3 for k, v in stats.times.items()}
    print(f"agenda scope: {stats.nodes} recorded ops; ms record {ms['record']:.1f}, schedule "
          f"{ms['schedule']:.1f}, plan {ms['plan']:.1f}, execute {ms['execute']:.1f}; "
          f"copied {stats.copied_bytes / 1e6:.1f} MB")
    if args.explain:
        print("\n" + scopes["agenda"].explain())
    return 0 if agree else 1


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "demo":
        print("usage: python -m lazyarray demo [--trees N] [--hidden H] [--repeats R] [--explain]")
        return 2
    reexec_with_blas_threads("lazyarray", argv)
    return demo(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
