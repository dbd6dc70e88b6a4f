"""Learned batching policies (ED-Batch §2) for a model, and the Fig. 9 / Table 3 analogs.

    policy = la.learn_policy(lambda trees: model_loss(trees), [trees_a, trees_b])
    with la.batching(scheduler=policy):
        ...
    policy.save("treelstm.policy.json"); la.load_policy("treelstm.policy.json")
"""
from __future__ import annotations

import gc
import time

import batching

from .scope import record

FSMPolicy = batching.FSMPolicy
PolicyError = batching.PolicyError


def learn_policy(fn, samples, **options) -> FSMPolicy:
    """Learn an FSM batching policy (ED-Batch §2) for the model that ``fn`` records.

    ``fn(sample)`` is called on each element of ``samples`` inside a recording scope that never
    executes (one sample = what one batching scope would hold, e.g. a list of 64 trees). The
    policy maps the frontier's state to the type to batch next; it is learned by tabular
    Q-learning over those graphs, starting from the schedules of ED-Batch's sufficient-condition
    heuristic (with E_sort, new states may instead follow learned ones with the same frontier
    types, when that batches the samples in fewer), and stops early once the samples' schedules
    meet the lower bound; with several samples, a table is kept only if it also schedules each
    sample no worse from what it learned on the others. The table kept is then improved by
    trying other choices in its recurring states on the samples, and joined by the recurring
    states that the heuristic decided while learning, with its choice. In states it never saw, the
    policy follows the learned states that share the state's most common frontier types
    (E_sort), then the agenda rule. Options
    (defaults in ``batching.qlearning.DEFAULTS``): ``encoding`` ("sort": the frontier's types
    by count, "max", "base"), ``episodes`` (at most, 1000), ``alpha`` (weight of Eq. 1's
    Lemma-1 reward term, 1.0), ``epsilon`` (exploration, 0.2), ``gamma`` (discount, 0.9),
    ``nstep`` (bootstrapping horizon, 8), ``lr`` (0.5), ``phases`` (progress buckets in the
    state, 0), ``seed`` (0), ``prior`` ("sufficient", "agenda" or "optimistic"),
    ``check_every`` (50), ``patience`` (checks without progress before stopping, 6),
    ``patience_nodes`` (or nodes batched by exploration without progress, 3M),
    ``refine_nodes`` (nodes batched by the improvement's trials at most, 5M; 0: none),
    ``time_limit`` (seconds, None), ``node_limit`` (nodes batched by all of learning's
    rollouts, None: a budget that, unlike seconds, gives the same policy on any machine).
    Returns a policy for ``la.batching(scheduler=policy)``, with ``save(path)``;
    ``policy.stats`` says how learning went."""
    samples = list(samples)
    if not samples:
        raise ValueError("la.learn_policy needs at least one sample to record")
    return batching.learn_policy([record(fn, sample) for sample in samples], **options)


def load_policy(path) -> FSMPolicy:
    """A policy saved by ``policy.save(path)``; ``PolicyError`` if the file is not one, is
    corrupt in any way, was written by another format version, or is larger than 16 MiB
    (``batching.fsm.MAX_BYTES``, checked before it is read: a policy file may come from anywhere,
    learned ones take kilobytes, and loading holds about 22 times a file's size)."""
    return batching.load_policy(path)


# -- ED-Batch Fig. 9 and Table 3 on the reference workloads ------------------------------------

REPORT_WORKLOADS = ("treelstm", "treegru", "treelstm2type", "mvrnn", "treefc", "bilstm", "varlstm", "lstmnmt",
                    "latticelstm", "latticegru")
FIXED = ("depth", "agenda", "sufficient")


def scheduler_report(workloads=REPORT_WORKLOADS, instances=64, H=32, train=2, seed=0, repeats=7, cells=False,
                     **options):
    """Per workload: batches of each scheduler on one scope of ``instances`` instances, the
    FSM learned with each encoding on ``train`` other scopes of the same size, the lower
    bounds (A.3 and ``path_bound``), per encoding the learning time and episodes, and the
    run-time cost of scheduling that scope (ns per node, best of ``repeats`` interleaved runs:
    the machines are noisy, so compare within a row). With ``cells``, the graphs of the cell-style models (workloads
    without one are left out): ED-Batch learns on graphs of static subgraphs, so its Fig. 9
    and Table 3 compare with these. Returns a list of dicts."""
    from .workloads import WORKLOADS

    rows = []
    for name in workloads:
        w = WORKLOADS[name]
        if cells and w.cells is None:
            continue
        params = w.init(H, seed).lazy()
        def fn(data, w=w, params=params):
            return w.scope_loss(params, data, cells=cells)
        view = record(fn, w.data(instances, seed))
        samples = [record(fn, w.data(instances, seed + 1 + k)) for k in range(train)]
        row = dict(workload=name, nodes=len(view), types=view.ntypes, lower_bound=batching.lower_bound(view),
                   path_bound=batching.path_bound(view))
        schedulers = {fixed: batching.resolve(fixed) for fixed in FIXED}
        for fixed, scheduler in schedulers.items():
            row[fixed] = len(scheduler.schedule(view))
        for encoding in batching.ENCODINGS:
            began = time.perf_counter()
            policy = batching.learn_policy(samples, encoding=encoding, seed=seed, **options)
            row[f"fsm-{encoding}"] = len(policy.schedule(view))
            row[f"learn-{encoding}"] = (time.perf_counter() - began, policy.stats["episodes"])
            schedulers[f"fsm-{encoding}"] = policy
        row["ns"] = _schedule_cost(schedulers, view, repeats)
        rows.append(row)
    return rows


def _schedule_cost(schedulers: dict, view, repeats: int) -> dict:
    """name -> best ns per node of ``schedule(view)``, runs of all schedulers interleaved."""
    best = dict.fromkeys(schedulers, float("inf"))
    for _ in range(repeats):
        for name, scheduler in schedulers.items():
            gc.collect()
            began = time.perf_counter()
            scheduler.schedule(view)
            best[name] = min(best[name], time.perf_counter() - began)
    return {name: seconds / max(len(view), 1) * 1e9 for name, seconds in best.items()}


def format_report(rows) -> str:
    """The rows of ``scheduler_report`` as the Fig. 9 table (batches, lower bound), the
    Table 3 table (learning seconds and episodes per encoding) and the run-time cost table."""
    fsm = [f"fsm-{e}" for e in batching.ENCODINGS]
    head = ["workload", "nodes", *FIXED, *fsm, "bound", "path bound"]
    lines = ["Batches per scheduler (ED-Batch Fig. 9)", "  ".join(f"{h:>13}" for h in head)]
    for r in rows:
        cells = [r["workload"], r["nodes"], *(r[k] for k in (*FIXED, *fsm)), r["lower_bound"], r["path_bound"]]
        lines.append("  ".join(f"{c:>13}" for c in cells))
    lines += ["", "Learning (ED-Batch Table 3): seconds / episodes",
              "  ".join(f"{h:>13}" for h in ["workload", *batching.ENCODINGS])]
    for r in rows:
        cells = [f"{r[f'learn-{e}'][0]:.3f}s/{r[f'learn-{e}'][1]}" for e in batching.ENCODINGS]
        lines.append("  ".join(f"{c:>13}" for c in [r["workload"], *cells]))
    lines += ["", "Run-time scheduling cost, ns per node (the policies on a scope they did not learn on)",
              "  ".join(f"{h:>13}" for h in ["workload", *FIXED, *fsm, "fsm-sort/agenda"])]
    for r in rows:
        ns = r["ns"]
        cells = [f"{ns[k]:.0f}" for k in (*FIXED, *fsm)] + [f"{ns['fsm-sort'] / ns['agenda']:.3f}"]
        lines.append("  ".join(f"{c:>13}" for c in [r["workload"], *cells]))
    return "\n".join(lines)
