"""Training throughput (``python -m benchmarks --train``): one step = forward, backward and an SGD
update on the summed loss of a minibatch, for lazyarray (cells and op level, agenda), the same
code eagerly, hand-batched numpy with gradients written out (``train_hand``), PyTorch
hand-batched and per instance (``train_torch``), and DyNet with and without autobatching
(``train_dynet``), each from the same initial parameters. Every system's first step is checked
to compute eager's loss (rtol 1e-4), and every system but eager runs ``WARMUP`` more steps,
before any is timed; steps are timed interleaved, medians,
in wall time and in the process's CPU time (every system runs one thread: on an idle machine
the two agree, on a shared one the CPU time leaves out what other processes took).

By default the timed steps cycle the same few minibatches, so lazyarray replays its flushes
from the plan cache. ``--fresh`` gives every step a minibatch no step ran before (every system
the same sequence), as a training loop over new data: lazyarray then schedules and compiles
every flush. New data rather than clearing the cache, so that nothing else a real loop would
not have stays warm (a program's per-rows memos, the cache's recent entries).

``--train-memory`` prints the peak RSS of one TreeLSTM step per system, each in a fresh process.
"""
from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import lazyarray as la
from lazyarray.workloads import WORKLOADS

from . import train_hand

TRAIN_WORKLOADS = ("treelstm", "bilstm", "treefc", "latticelstm")
LR = 0.01
WARMUP = 2      # untimed steps of every system (but eager's) after the first


def _total(w, params, chunk, cells=False):
    loss = w.scope_loss(params, chunk, cells=cells)
    return loss if loss.shape == () else la.sum(loss)


def lazyarray_step(w, params, scheduler=None, cells=False, stats=None):
    """One step of the same per-instance code: in a scope (``scheduler``), or eagerly (None)."""
    lazy = params.lazy()
    opt = la.optim.SGD(dict(lazy.items()), lr=LR)

    def step(chunk):
        if scheduler is None:
            loss = _total(w, lazy, chunk)
            loss.backward()
        else:
            with la.batching(scheduler=scheduler) as scope:
                loss = _total(w, lazy, chunk, cells)
                loss.backward()
            if stats is not None:
                stats.append(scope.stats)
        opt.step()
        return float(loss)

    return step


def systems(w, H, seed, stats, notes, eager=True):
    """name -> step(chunk) -> loss, each on its own copy of the same initial parameters."""
    init = lambda: w.init(H, seed=seed)  # noqa: E731
    out = {}
    if w.cells is not None:
        out["lazyarray cells, agenda"] = lazyarray_step(w, init(), "agenda", True, stats.setdefault("cells", []))
    out["lazyarray ops, agenda"] = lazyarray_step(w, init(), "agenda", False, stats.setdefault("ops", []))
    if eager:
        out["eager (same code)"] = lazyarray_step(w, init())
    if w.name in train_hand.MODELS:
        out["hand-batched numpy"] = train_hand.make_step(w.name, init(), "sgd", LR)
    for module, label, forms in (("torch", "torch", ("batched", "instance")), ("dynet", "dynet", (True, False))):
        if importlib.util.find_spec(module) is None:
            notes.append(f"{label}: not installed")
            continue
        try:
            mod = importlib.import_module(f"benchmarks.train_{module}")
        except Exception as e:  # an installed but broken framework is reported, not fatal
            notes.append(f"{label}: import failed: {e!r}")
            continue
        if w.name not in mod.MODELS if module == "dynet" else w.name not in mod.MODELS["batched"]:
            continue
        for form in forms:
            if module == "torch":
                out[f"torch {'hand-batched' if form == 'batched' else 'per instance'}"] = mod.make_step(
                    w.name, init(), "sgd", LR, form=form)
            else:
                out[f"dynet {'agenda' if form else 'no batching'}"] = mod.make_step(w.name, init(), "sgd", LR,
                                                                                autobatch=form)
    return out


def bench(name, H, instances, steps, repeats, seed=0, out=sys.stdout, fresh=False):
    """Prints one table; returns the number of systems that disagreed with eager. ``fresh``:
    each step (checked, warm-up, timed) on a minibatch of its own."""
    w = WORKLOADS[name]
    data = w.data(instances * (1 + WARMUP + steps * repeats if fresh else steps), seed=seed)
    minibatches = [data[k:k + instances] for k in range(0, len(data), instances)]
    chunks = minibatches[:steps]
    stats, notes, failures = {}, [], 0
    runs = systems(w, H, seed, stats, notes)
    first = {n: run(chunks[0]) for n, run in runs.items()}
    reference = first["eager (same code)"]
    timed = {}
    for n, loss in first.items():
        if not np.isclose(loss, reference, rtol=1e-4):
            notes.append(f"{n}: first loss {loss} differs from eager's {reference}: not timed")
            failures += 1
        elif not n.startswith("eager"):
            timed[n] = []
    for k in range(WARMUP):     # caches, memos, the allocator and the collector settle as in a
        for n in timed:         # training loop (the first steps ran ~5% slower)
            runs[n](minibatches[1 + k] if fresh else chunks[k % len(chunks)])
    times = {n: [] for n in timed}
    cpu = {n: [] for n in timed}     # the process's CPU time: what other processes take is not in it
    eager_times = []
    for r in range(repeats):
        if fresh:
            chunks = minibatches[1 + WARMUP + r * steps:1 + WARMUP + (r + 1) * steps]
        for n in timed:
            gc.collect()
            start, start_cpu = time.perf_counter(), time.process_time()
            for chunk in chunks:
                runs[n](chunk)
            times[n].append((time.perf_counter() - start) / len(chunks))
            cpu[n].append((time.process_time() - start_cpu) / len(chunks))
        if r == 0:      # eagerly a step costs ~20-40x: timed on one repeat
            gc.collect()
            start = time.perf_counter()
            runs["eager (same code)"](chunks[0])
            eager_times.append(time.perf_counter() - start)
    median = {n: statistics.median(t) for n, t in times.items()}
    median["eager (same code)"] = eager_times[0]
    cpu = {n: statistics.median(t) for n, t in cpu.items()}
    hand, cpu_hand = median.get("hand-batched numpy"), cpu.get("hand-batched numpy")
    dynet, cpu_dynet = median.get("dynet agenda"), cpu.get("dynet agenda")
    data_note = "a new minibatch every step" if fresh else "the same minibatches"
    print(f"\n{w.title} training: H={H}, {instances} instances per step (SGD), {len(chunks)} steps x "
          f"{repeats} repeats (medians), {data_note}, BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; "
          "cpu: the process's CPU time, which leaves out what other processes take of a shared machine", file=out)
    print(f"  {'system':<28}{'inst/s':>9}{'ms/step':>9}{'vs hand':>9}{'vs DyNet':>10}"
          f"{'cpu ms':>9}{'vs hand':>9}{'vs DyNet':>10}", file=out)
    for n, t in sorted(median.items(), key=lambda kv: kv[1]):
        rel = lambda base, t: f"{base / t:>8.2f}x" if base else f"{'-':>9}"  # noqa: E731
        c = cpu.get(n)
        cols = f"{1e3 * c:>9.1f}{rel(cpu_hand, c)}{rel(cpu_dynet, c):>10}" if c else ""
        print(f"  {n:<28}{instances / t:>9.0f}{1e3 * t:>9.1f}{rel(hand, t)}{rel(dynet, t):>10}{cols}", file=out)
    for style, scopes in stats.items():
        last = scopes[-len(chunks):]
        if not last:
            continue
        ms = {k: 1e3 * statistics.fmean(s.times[k] for s in last) for k in last[0].times}
        step = 1e3 * median.get(f"lazyarray {style}, agenda", float("nan"))
        print(f"  lazyarray {style}: ms per step record {ms['record']:.1f}, schedule {ms['schedule']:.2f}, plan "
              f"{ms['plan']:.2f}, execute {ms['execute']:.1f}, backward {ms['backward']:.1f} "
              f"(scheduling + planning {100 * (ms['schedule'] + ms['plan']) / step:.1f}% of the step; "
              f"{statistics.fmean(s.cache_hits for s in last):.0%} plan-cache hits)", file=out)
    for note in notes:
        print(f"  note: {note}", file=out)
    return failures


_MEMORY_SCRIPT = """
import resource, sys
from benchmarks import train_bench
from lazyarray.workloads import WORKLOADS
w = WORKLOADS["treelstm"]
name, H, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps = train_bench.systems(w, H, 0, {}, [], eager=False)
step, data = steps[name], w.data(n, seed=0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
step(data)
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def memory(H=256, instances=256, out=sys.stdout):
    """Peak RSS of one TreeLSTM training step per system, each in a fresh process (kB): the
    process's peak after the step, and the growth over its peak before (imports, data)."""
    names = ["hand-batched numpy", "lazyarray cells, agenda", "lazyarray ops, agenda", "torch hand-batched"]
    print(f"\nTreeLSTM training step, H={H}, {instances} trees: peak RSS per system (a fresh process each)", file=out)
    print(f"  {'system':<28}{'peak MB':>9}{'step MB':>9}", file=out)
    rows = {}
    for name in names:
        env = dict(os.environ, PYTHONPATH=os.getcwd())
        done = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, name, str(H), str(instances)],
                              capture_output=True, text=True, env=env)
        if done.returncode:
            print(f"  {name:<28} failed: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode}",
                  file=out)
            continue
        before, after = map(int, done.stdout.split()[-2:])
        rows[name] = (after / 1024, (after - before) / 1024)
        print(f"  {name:<28}{after / 1024:>9.0f}{(after - before) / 1024:>9.0f}", file=out)
    hand = rows.get("hand-batched numpy")
    if hand:
        for name, (peak, grown) in rows.items():
            print(f"  {name}: peak {peak / hand[0]:.2f}x hand-batched's", file=out)


def reference(steps=20, H=128, out=sys.stdout) -> float:
    """``python -m lazyarray train``'s first ``steps`` losses against the PyTorch reference of the
    same run (``train_torch.reference_losses``: same initialisation, data order, Adagrad), in
    float32 and in float64. Returns the float64 run's largest relative difference. In float32
    both runs round differently, and Adagrad's first steps (updates of lr * sign(g) wherever
    |g| >> eps) turn those roundings into ~1e-4 differences within 20 steps, between any two
    implementations (this hand-written numpy and PyTorch differ as much): float64 shows the
    runs compute the same thing."""
    from lazyarray import train
    from lazyarray.workloads import load_sst
    from lazyarray.workloads.params import Params
    from . import train_torch
    trees = load_sst("train")
    w = WORKLOADS["treelstm"]
    worst = {}
    for dtype in (np.float32, np.float64):
        init = Params(**{k: v.astype(dtype) for k, v in w.init(H=H, seed=0).items()})
        ref = train_torch.reference_losses(init, trees, steps=steps, batch=25, lr=0.05, seed=0, dtype=dtype)
        params = Params(**{k: v.copy() for k, v in init.items()}).lazy()
        opt = la.optim.Adagrad([p for _, p in params.items()], lr=0.05)
        mine = [train.train_step(params, opt, [trees[i] for i in idx])
                for idx in train.batches(len(trees), 25, 0)[:steps]]
        rel = np.abs(np.array(mine) - np.array(ref)) / np.abs(ref)
        worst[dtype] = rel.max()
        print(f"  {np.dtype(dtype).name}: first {steps} losses of `python -m lazyarray train` against PyTorch's: "
              f"largest relative difference {rel.max():.2e} (step 1: {rel[0]:.1e}; losses {mine[0]:.4f} ... "
              f"{mine[-1]:.4f})", file=out)
    return worst[np.float64]


def main(args, out=sys.stdout) -> int:
    if args.train_memory:
        memory(out=out)
        return 0
    if args.train_reference:
        print("\nTreeLSTM sentiment training (SST train, H=128, Adagrad lr 0.05, 25 trees a step) against "
              "benchmarks/train_torch.py's reference", file=out)
        return 0 if reference(out=out) < 1e-4 else 1
    names = [n for n in args.workload if n in TRAIN_WORKLOADS] or list(TRAIN_WORKLOADS)
    sizes = [args.H] if args.H_given else ([32] if args.quick else [128, 256])
    failures = 0
    for name in names:
        for H in sizes:
            failures += bench(name, H, args.instances, args.scopes, args.repeats, args.seed, out, args.fresh)
    return 1 if failures else 0
