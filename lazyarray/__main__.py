"""``python -m lazyarray demo``: the TreeLSTM of WORKLOADS.md on bundled SST test trees, eager
vs batched (op-level code and the same model written with cells, each with the depth and agenda
schedulers) vs hand-batched numpy (from the repository's ``benchmarks`` package, where it is
importable: run from the repository root), printing loss agreement, batches against the lower
bound, and trees per second."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import lazyarray as la
from lazyarray.threads import reexec_with_blas_threads
from lazyarray.workloads import WORKLOADS


def positive(text: str) -> int:
    """An argparse type: a count that is at least 1 (0 trees or -5 repeats would fail later
    with a traceback)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _hand_batched():
    """The hand-batched TreeLSTM of the repository's ``benchmarks`` package, or None where that
    package is not importable (the library never installs it)."""
    try:
        from benchmarks.hand import HAND
    except ModuleNotFoundError as e:
        if e.name not in ("benchmarks", "benchmarks.hand"):
            raise
        return None
    return HAND["treelstm"]["levels"]


def _best(fn, repeats):
    """Fastest time of ``repeats`` runs and that run's result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        if elapsed < best:
            best, out = elapsed, result
    return best, out


def demo(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lazyarray demo", description=__doc__)
    parser.add_argument("--trees", type=positive, default=64, help="trees per batching scope")
    parser.add_argument("--hidden", type=positive, default=128, help="hidden size H")
    parser.add_argument("--repeats", type=positive, default=5, help="timing repeats (best is shown)")
    parser.add_argument("--explain", action="store_true", help="print the agenda schedule per signature")
    args = parser.parse_args(argv)

    w = WORKLOADS["treelstm"]
    params = w.init(H=args.hidden, seed=0)
    lazy = params.lazy()
    trees = w.data(args.trees, seed=0)
    print(f"TreeLSTM, H={args.hidden}, {args.trees} SST test trees per scope "
          f"({sum(len(t) for t in trees)} tree nodes), 1 BLAS thread, recording "
          + ("compiled" if la.compiled else "pure Python (the slow path: pip install -e . with Cython and a "
                                            "C compiler compiles it)"))

    rows = []
    def eager_loss():
        with la.no_grad():      # inference: no record for a backward
            return float(w.scope_loss(lazy, trees))

    t_eager, eager = _best(eager_loss, args.repeats)
    rows.append(("eager (same code, no scope)", eager, t_eager, None))
    hand_batched = _hand_batched()
    if hand_batched is not None:
        t_hand, hand = _best(lambda: float(hand_batched(params, trees)), args.repeats)
        rows.append(("hand-batched numpy (levels)", hand, t_hand, None))
    scopes = {}
    for cells in (False, True):
        for scheduler in ("depth", "agenda"):
            name = f"lazyarray {'cells' if cells else 'ops'}, {scheduler}"

            def run():
                with la.batching(scheduler=scheduler) as scope:
                    total = w.scope_loss(lazy, trees, cells=cells)
                return float(total), scope
            t, (value, scopes[name]) = _best(run, args.repeats)
            rows.append((name, value, t, scopes[name].stats))

    print(f"\n{'':32} {'loss':>14} {'trees/s':>9} {'vs eager':>8} {'batches':>8} {'lower bd':>8} {'kernels':>8}")
    for name, value, t, stats in rows:
        extra = f" {stats.batches:>8} {stats.lower_bound:>8} {stats.kernels:>8}" if stats else ""
        print(f"{name:32} {value:>14.4f} {args.trees / t:>9.0f} {t_eager / t:>7.2f}x{extra}")
    if hand_batched is None:
        print("hand-batched numpy: skipped (the repository's `benchmarks` package is not importable; "
              "run from the repository root)")
    agree = all(np.isclose(v, eager, rtol=1e-4) for _, v, _, _ in rows)
    print(f"\nlosses agree with eager (rtol 1e-4): {'yes' if agree else 'NO'}")
    for name in ("lazyarray ops, agenda", "lazyarray cells, agenda"):
        stats = scopes[name].stats
        ms = {k: v * 1e3 for k, v in stats.times.items()}
        print(f"{name}: {stats.nodes} recorded nodes; ms record {ms['record']:.1f}, schedule "
              f"{ms['schedule']:.1f} (plan cache {stats.cache_hits} hit), plan {ms['plan']:.1f}, "
              f"execute {ms['execute']:.1f}; copied {stats.copied_bytes / 1e6:.1f} MB")
    if args.explain:
        print("\n" + scopes["lazyarray cells, agenda"].explain())
    return 0 if agree else 1


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("demo", "train"):
        print("usage: python -m lazyarray demo [--trees N] [--hidden H] [--repeats R] [--explain]\n"
              "       python -m lazyarray train [--epochs E] [--hidden H] [--batch B] [--lr LR] [--seed S] [--limit N]")
        return 2
    reexec_with_blas_threads("lazyarray", argv)
    if argv[0] == "train":
        from .train import main as train
        return train(argv[1:])
    return demo(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
