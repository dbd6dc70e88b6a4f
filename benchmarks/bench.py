"""Side-by-side throughput of the reference workloads (lazyarray.workloads): lazyarray with each
scheduler against per-instance eager numpy (the same model code outside a scope), the same model
written directly against numpy per instance (benchmarks.plain: "eager / plain numpy" under a table
is what eager mode costs), hand-batched numpy (benchmarks.hand), and PyTorch eager / DyNet
autobatch where they are installed. Every system is first checked to compute the eager result
(allclose), then timed on the same parameters and instances; the figures are medians over repeats,
interleaved so that all systems see the same machine state.

    python -m benchmarks --quick
    python -m benchmarks -w treelstm bilstm -H 128 -B 64 --scopes 4 --repeats 5
    python -m benchmarks -w parser chartagger

Run it from the repository root. It restarts itself with the BLAS thread variables set where
they are unset (--threads, 1 by default; see lazyarray.threads). The "fsm" scheduler learns its
policy on the first scope it sees, which is the untimed check run; its duration is noted under
the table.

A model whose code reads values while it runs (the transition parser: ``Workload.forces``) is
timed with the agenda scheduler three ways: its instances as tasks of ``scope.map`` (op-level
and cell-style code), and in one scope without ``map`` (every read flushes); flushes per scope
are shown against the longest instance's reads, which is what ``map`` needs.
"""
import argparse
import gc
import importlib
import importlib.util
import os
import statistics
import sys
import time

import numpy as np

import lazyarray as la
from lazyarray.__main__ import positive
from lazyarray.workloads import WORKLOADS

from .hand import HAND
from .plain import PLAIN

DEFAULT_WORKLOADS = ("treelstm", "bilstm", "latticelstm", "treefc")
QUICK = dict(H=32, instances=8, scopes=2, repeats=3)
FULL = dict(H=128, instances=64, scopes=4, repeats=5)
RTOL = 1e-4
PLAIN_ROW = "plain numpy (per instance)"


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"small sizes, a minute or less: {QUICK}")
    ap.add_argument("-w", "--workload", nargs="+", choices=[*WORKLOADS, "all"],
                    default=list(DEFAULT_WORKLOADS), help="workloads (default: %(default)s)")
    ap.add_argument("-H", type=positive, help=f"hidden size (default {FULL['H']})")
    ap.add_argument("-B", "--instances", type=positive, help=f"instances per scope (default {FULL['instances']})")
    ap.add_argument("--scopes", type=positive, help=f"scopes per timed run (default {FULL['scopes']})")
    ap.add_argument("--repeats", type=positive, help=f"timed runs; the median is shown (default {FULL['repeats']})")
    ap.add_argument("--schedulers", nargs="+", default=["depth", "agenda", "fsm"],
                    help="lazyarray schedulers; those the core does not accept are skipped")
    ap.add_argument("--threads", type=positive, default=1,
                    help="torch threads, and BLAS threads where the variables are unset")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memplan", action="store_true", help="also time lazyarray with memory plans")
    ap.add_argument("--memplan-table", action="store_true",
                    help="print the ED-Batch Table 2 analog (memory plan per cell) instead")
    ap.add_argument("--fsm-table", action="store_true",
                    help="print the ED-Batch Fig. 9 / Table 3 analogs (batches per scheduler, learning cost) instead")
    ap.add_argument("--cells", action="store_true",
                    help="with --fsm-table: on the cell-style models' graphs, as ED-Batch's static subgraphs")
    ap.add_argument("--train", action="store_true",
                    help="training throughput instead (forward + backward + SGD step; benchmarks.train_bench)")
    ap.add_argument("--fresh", action="store_true",
                    help="with --train: every step on a minibatch no step ran before, as a training loop "
                         "over new data (lazyarray's flushes miss the plan cache)")
    ap.add_argument("--train-memory", action="store_true",
                    help="peak RSS of one TreeLSTM training step per system (H=256, 256 trees)")
    ap.add_argument("--train-reference", action="store_true",
                    help="python -m lazyarray train's first 20 losses against the PyTorch reference")
    ap.add_argument("--micro", action="store_true",
                    help="per-call costs instead: recording la.tanh / np.tanh / W @ x + b, eager ops, and "
                         "forcing after 1k-160k recorded nodes (benchmarks.micro)")
    ap.add_argument("--compiled", action="store_true",
                    help="the compiled recording stubs against the pure-Python ones, per op and per scope "
                         "(benchmarks.compiled)")
    args = ap.parse_args(argv)
    args.H_given = args.H is not None
    for k, v in (QUICK if args.quick else FULL).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if "all" in args.workload:
        args.workload = list(WORKLOADS)
    return args


def _same(value, reference):
    value, reference = np.asarray(value, np.float64), np.asarray(reference, np.float64)
    atol = RTOL * max(1.0, float(np.abs(reference).max(initial=0.0)))
    return value.shape == reference.shape and np.allclose(value, reference, rtol=RTOL, atol=atol)


def systems(w, params, args, stats, notes):
    """name -> run(instances of one scope) -> result as numpy."""
    lazy = params.lazy()

    def lazyarray_run(scheduler, cells=False, memplan=False, tasks=False, label=None):
        label = label or f"{scheduler}{', cells' if cells else ''}{', memplan' if memplan else ''}"

        def run(chunk):
            with la.batching(scheduler=scheduler, memplan=memplan) as scope:
                result = w.scope_loss(lazy, chunk, cells=cells, scope=scope if tasks else None)
            stats.setdefault(label, []).append(scope.stats)
            return np.asarray(result)
        return label, run

    styles = [False, True] if w.cells is not None else [False]
    if w.forces is not None:    # without map each read flushes: one row of that, not one per scheduler
        out = dict([lazyarray_run("agenda", cells, tasks=True, label=f"map {'cells' if cells else 'ops'}")
                    for cells in styles] + [lazyarray_run("agenda", label="scope without map")])
    else:
        plans = [False, True] if args.memplan else [False]
        out = dict(lazyarray_run(s, cells, memplan) for cells in styles for memplan in plans
                   for s in args.schedulers)
    out = {f"lazyarray {label}": run for label, run in out.items()}

    def eager(chunk):
        with la.no_grad():      # inference: no record for a backward
            return np.asarray(w.scope_loss(lazy, chunk))

    out["eager numpy"] = eager
    out[PLAIN_ROW] = lambda chunk: PLAIN[w.name](params, chunk)  # what eager mode should cost
    out.update({f"hand-batched {form}": (lambda f: lambda chunk: f(params, chunk))(f)
                for form, f in HAND.get(w.name, {}).items()})
    for framework, module, label, make in (
            ("torch", "benchmarks.torch_eager", "torch eager", _torch_run),
            ("dynet", "benchmarks.dynet_autobatch", "dynet autobatch", _dynet_run)):
        if importlib.util.find_spec(framework) is None:
            notes.append(f"{label}: not installed")
            continue
        try:
            mod = importlib.import_module(module)
        except Exception as e:  # an installed but broken framework is reported, not fatal
            notes.append(f"{label}: import failed: {e!r}")
            continue
        if w.name in mod.MODELS:
            out[label] = make(mod, w.name, params, args.threads)
    return out


def _torch_run(mod, name, params, threads):
    import torch

    torch.set_num_threads(threads)
    model, p = mod.MODELS[name], mod.tensors(params)

    def run(chunk):
        with torch.inference_mode():
            return model(p, chunk).numpy()
    return run


def _dynet_run(mod, name, params, threads):
    model, loaded = mod.MODELS[name], mod.Model(params)
    return lambda chunk: np.asarray(model(loaded, chunk))


def bench_workload(w, args, out=sys.stdout):
    """Prints one table; returns the number of systems that failed or disagreed."""
    params = w.init(args.H, seed=args.seed)
    data = w.data(args.instances * args.scopes, seed=args.seed)
    chunks = [data[k:k + args.instances] for k in range(0, len(data), args.instances)]
    stats, notes, failures = {}, [], 0
    runs = systems(w, params, args, stats, notes)
    reference = runs["eager numpy"](chunks[0])
    timed = {}
    for name, run in runs.items():
        start = time.perf_counter()
        try:
            value = run(chunks[0])
        except Exception as e:
            optional = (name.startswith("lazyarray ")
                        and name.split()[1].rstrip(",") not in ("depth", "agenda", "map", "scope"))
            notes.append(f"{name}: {'skipped' if optional else 'FAILED'}: {type(e).__name__}: {e}")
            failures += not optional
            continue
        if not _same(value, reference):
            notes.append(f"{name}: MISMATCH with eager numpy, not timed "
                         f"({np.ravel(value)[:3]} vs {np.ravel(reference)[:3]})")
            failures += 1
            continue
        if name == "lazyarray fsm":
            notes.append(f"{name}: first scope, which learns the policy: {time.perf_counter() - start:.2f} s")
        timed[name] = []
    for _ in range(args.repeats):
        for name in timed:
            gc.collect()  # no system pays for the cyclic garbage of the one before (torch, DyNet)
            start = time.perf_counter()
            for chunk in chunks:
                runs[name](chunk)
            timed[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) for name, t in timed.items()}
    hand = next((median[n] for n in median if n.startswith("hand-batched")), None)

    print(f"\n{w.title} ({w.name}): H={args.H}, {args.instances} instances/scope x {len(chunks)} scopes, "
          f"median of {args.repeats}, BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}", file=out)
    print(f"  {'system':<30}{'inst/s':>10}{'ms/scope':>10}{'time/hand':>11}", file=out)
    for name, t in median.items():
        ratio = f"{t / hand:>10.2f}x" if hand else f"{'-':>11}"
        print(f"  {name:<30}{len(data) / t:>10.1f}{1e3 * t / len(chunks):>10.2f}{ratio}", file=out)
    if stats:
        print(f"  {'lazyarray, mean per scope':<30}{'nodes':>8}{'batches':>9}{'lower bd':>9}{'kernels':>9}"
              f"{'copied KiB':>11}   ms: record/schedule/plan/execute", file=out)
        for scheduler, scopes in stats.items():
            last_run = scopes[-len(chunks):]
            mean = lambda get: statistics.fmean(get(s) for s in last_run)  # noqa: E731
            phases = "/".join(f"{1e3 * mean(lambda s: s.times[k]):.1f}"
                              for k in ("record", "schedule", "plan", "execute"))
            print(f"  {scheduler:<30}{mean(lambda s: s.nodes):>8.0f}{mean(lambda s: s.batches):>9.0f}"
                  f"{mean(lambda s: s.lower_bound):>9.0f}{mean(lambda s: s.kernels):>9.0f}"
                  f"{mean(lambda s: s.copied_bytes) / 1024:>11.1f}   {phases}", file=out)
        if w.forces is not None:
            longest = statistics.fmean(max(map(w.forces, chunk)) for chunk in chunks)
            every = statistics.fmean(sum(map(w.forces, chunk)) for chunk in chunks)
            print("  flushes per scope: " + ", ".join(
                f"{label} {statistics.fmean(s.flushes for s in scopes[-len(chunks):]):.0f}"
                for label, scopes in stats.items())
                + f"; reads of the longest instance {longest:.0f}, of all {every:.0f}", file=out)
            print("  per flush (the first, all the encoders, included): " + "; ".join(
                _per_flush(label, scopes[-len(chunks):]) for label, scopes in stats.items()), file=out)
    if "eager numpy" in median and PLAIN_ROW in median:
        print(f"  eager / plain numpy: {median['eager numpy'] / median[PLAIN_ROW]:.2f}x", file=out)
    for note in notes:
        print(f"  note: {note}", file=out)
    return failures


def _per_flush(label, scopes) -> str:
    """Mean schedule and plan (compile) time of a flush, and the plan cache's hits: what the
    flushes of a value-reading model cost besides their kernels."""
    flushes = sum(s.cache_hits + s.cache_misses for s in scopes) or 1
    schedule, plan = (1e6 * sum(s.times[k] for s in scopes) / flushes for k in ("schedule", "plan"))
    hits = sum(s.cache_hits for s in scopes) / flushes
    return f"{label} schedule {schedule:.0f} us, plan {plan:.0f} us, cache hits {hits:.0%}"


def _lstm_gate_weights(p, x, h, c):
    """``cells.lstm_cell`` written with one weight per gate (W_i, W_f, W_o, W_u): the form that
    weight arrangement (lazyarray.arrange) turns back into one product inside a cell."""
    xh = la.concatenate([x, h])
    i, f, o = (la.sigmoid(W @ xh + b) for W, b in ((p.W_i, p.b_i), (p.W_f, p.b_f), (p.W_o, p.b_o)))
    c = f * c + i * la.tanh(p.W_u @ xh + p.b_u)
    return o * la.tanh(c), c


def _gru_gate_weights(p, x, h):
    """``cells.gru_cell`` with one weight per gate (W_z, W_r, then W_h on [x; r * h])."""
    xh = la.concatenate([x, h])
    z, r = la.sigmoid(p.W_z @ xh + p.b_z), la.sigmoid(p.W_r @ xh + p.b_r)
    return (1 - z) * h + z * la.tanh(p.W_h @ la.concatenate([x, r * h]) + p.b_h)


def _cell_cases(H, seed):
    """ED-Batch Table 2's cells: name -> (cell body over the inputs, number of inputs)."""
    from lazyarray.workloads import cells, trees
    rng = np.random.default_rng(seed)
    P = lambda *shape: la.parameter((rng.standard_normal(shape) * 0.1).astype(np.float32))  # noqa: E731
    lstm_W, lstm_b, gru = P(4 * H, 2 * H), P(4 * H), (P(2 * H, 2 * H), P(2 * H), P(H, 2 * H), P(H))
    tl = type("P", (), dict(W_leaf=P(3 * H, H), b_leaf=P(3 * H), U=P(5 * H, 2 * H), b=P(5 * H)))
    tg = type("P", (), dict(W_leaf=P(H, H), b_leaf=P(H), U_g=P(3 * H, 2 * H), b_g=P(3 * H),
                            U_h=P(H, 2 * H), b_h=P(H)))
    mv = type("P", (), dict(W=P(H, 2 * H), b=P(H), W_M=P(H, 2 * H)))
    lg = type("P", (), {**{f"W_{g}": P(H, 2 * H) for g in "ifou"}, **{f"b_{g}": P(H) for g in "ifou"}})
    gg = type("P", (), {**{f"W_{g}": P(H, 2 * H) for g in "zrh"}, **{f"b_{g}": P(H) for g in "zrh"}})
    return {
        "GRU cell": (lambda x, h: cells.gru_cell(*gru, x, h), ["v", "v"]),
        "GRU cell (gate weights)": (lambda x, h: _gru_gate_weights(gg, x, h), ["v", "v"]),
        "LSTM cell": (lambda x, h, c: cells.lstm_cell(lstm_W, lstm_b, x, h, c), ["v", "v", "v"]),
        "LSTM cell (gate weights)": (lambda x, h, c: _lstm_gate_weights(lg, x, h, c), ["v", "v", "v"]),
        "MV cell": (lambda al, Al, ar, Ar: trees.mvrnn_internal(mv, al, Al, ar, Ar), ["v", "m", "v", "m"]),
        "TreeGRU internal": (lambda hl, hr: trees.treegru_internal(tg, hl, hr), ["v", "v"]),
        "TreeGRU leaf": (lambda x: trees.treegru_leaf(tg, x), ["v"]),
        "TreeLSTM internal": (lambda hl, cl, hr, cr: trees.treelstm_internal(tl, hl, cl, hr, cr), ["v"] * 4),
        "TreeLSTM leaf": (lambda x: trees.treelstm_leaf(tl, x), ["v"]),
    }


def memplan_table(H=64, batch=8, repeats=20, seed=0, out=sys.stdout):
    """ED-Batch Table 2 analog: ``batch`` op-level calls of each cell whose inputs were produced
    by earlier batches in another order (as in a tree or an RNN), with and without the memory
    plan: kernels, copied bytes and time per cell (the plan comes from the cache after the
    first scope, as it would for a repeated structure; its one-off cost is shown apart)."""
    rng = np.random.default_rng(seed)
    print(f"\nMemory plan per cell (ED-Batch Table 2 analog): batch {batch}, H={H}, median of {repeats}", file=out)
    print(f"  {'cell':<26}{'kernels':>14}{'copied bytes':>22}{'us per cell':>14}{'plan ms':>9}", file=out)
    print(f"  {'':<26}{'plain -> plan':>14}{'plain -> plan':>22}{'plain -> plan':>14}", file=out)
    for name, (body, kinds) in _cell_cases(H, seed).items():
        raw = [[rng.standard_normal((H, H) if k == "m" else H).astype(np.float32) for k in kinds]
               for _ in range(batch)]
        order = rng.permutation(batch * len(kinds))

        def run(memplan):
            with la.batching(memplan=memplan) as scope:
                flat = [x for inputs in raw for x in inputs]
                made = {int(j): la.tanh(flat[j]) for j in order}  # produced out of order
                outs = [body(*[made[i * len(kinds) + k] for k in range(len(kinds))]) for i in range(batch)]
            return scope.stats, outs

        row = {}
        for memplan in (False, True):
            stats, _ = run(memplan)
            first_plan = stats.times["plan"]
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                stats, _ = run(memplan)
                times.append(time.perf_counter() - start)
            row[memplan] = (stats.kernels, stats.copied_bytes, statistics.median(times) / batch * 1e6, first_plan)
        (k0, c0, t0, _), (k1, c1, t1, p1) = row[False], row[True]
        print(f"  {name:<26}{f'{k0} -> {k1}':>14}{f'{c0} -> {c1}':>22}{f'{t0:.0f} -> {t1:.0f}':>14}{p1 * 1e3:>9.1f}",
              file=out)


def arrange_table(H=64, batch=8, repeats=20, seed=0, out=sys.stdout):
    """The same cells as ``la.cell``s, traced with and without weight arrangement
    (lazyarray.arrange): kernels of the traced body per batch of calls, kernels of a scope of
    ``batch`` calls (with input stacking and output copies), time per call of the whole scope
    (recording included) and of its execution alone (medians of ``repeats`` scopes, the two
    variants interleaved)."""
    from lazyarray import arrange
    from lazyarray.scope import SIGNATURES

    def plan(cell):
        return SIGNATURES.table.payload[max(e[0] for k, e in SIGNATURES.entries.items() if k and k[0] == cell.key)].plan

    rng = np.random.default_rng(seed)
    print(f"\nWeight arrangement per cell (la.cell): batch {batch}, H={H}, median of {repeats}", file=out)
    print(f"  {'cell':<26}{'body kernels':>14}{'scope kernels':>15}{'us per cell':>14}{'execute us':>14}", file=out)
    print(f"  {'':<26}{'plain -> arr.':>14}{'plain -> arr.':>15}{'plain -> arr.':>14}{'plain -> arr.':>14}",
          file=out)
    for name, (body, kinds) in _cell_cases(H, seed).items():
        raw = [[rng.standard_normal((H, H) if k == "m" else H).astype(np.float32) for k in kinds]
               for _ in range(batch)]
        variants = {False: la.cell(body), True: la.cell(body)}

        def run(cell):
            with la.batching() as scope:
                outs = [cell(*inputs) for inputs in raw]
            return scope.stats, [np.asarray(o[0] if isinstance(o, tuple) else o) for o in outs]

        with arrange.disabled():
            _, want = run(variants[False])  # traced here, without arrangement
        _, got = run(variants[True])
        if not all(_same(g, w) for g, w in zip(got, want)):
            print(f"  {name:<26}MISMATCH between plain and arranged, not timed", file=out)
            continue
        times, execute, kernels = {False: [], True: []}, {False: [], True: []}, {}
        for _ in range(repeats):
            for arranged, cell in variants.items():
                start = time.perf_counter()
                stats, _ = run(cell)
                times[arranged].append(time.perf_counter() - start)
                execute[arranged].append(stats.times["execute"])
                kernels[arranged] = stats.kernels
        body_k = {a: plan(c).kernels for a, c in variants.items()}
        t0, t1 = (statistics.median(times[a]) / batch * 1e6 for a in (False, True))
        e0, e1 = (statistics.median(execute[a]) / batch * 1e6 for a in (False, True))
        print(f"  {name:<26}{f'{body_k[False]} -> {body_k[True]}':>14}{f'{kernels[False]} -> {kernels[True]}':>15}"
              f"{f'{t0:.0f} -> {t1:.0f}':>14}{f'{e0:.1f} -> {e1:.1f}':>14}", file=out)


def main(argv=None, out=sys.stdout):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.train or args.train_memory or args.train_reference:
        from . import train_bench
        return train_bench.main(args, out)
    if args.micro:
        from . import micro
        return micro.main(out)
    if args.compiled:
        from . import compiled
        return compiled.run(H=args.H, instances=args.instances, rounds=args.repeats, out=out)
    if args.memplan_table:
        memplan_table(out=out, repeats=3 if args.quick else 20)
        arrange_table(out=out, repeats=3 if args.quick else 20)
        return 0
    if args.fsm_table:
        from lazyarray.policy import format_report, scheduler_report
        names = args.workload if args.workload != list(DEFAULT_WORKLOADS) else None
        rows = scheduler_report(**({"workloads": names} if names else {}),
                                instances=8 if args.quick else 64, H=args.H if args.quick else 32, cells=args.cells)
        print(format_report(rows), file=out)
        return 0
    failures = sum(bench_workload(WORKLOADS[name], args, out) for name in args.workload)
    return 1 if failures else 0

