"""ED-Batch Fig. 9 and Table 3 under asv: batches per scheduler against the lower bounds on the
synthetic Fig. 1 / Fig. 10 graphs and the reference workloads (op-level and, "-cells",
cell-style, 64 instances; the FSM learned on two other scopes of the model), the time to learn
a policy, and the run-time cost of scheduling a new graph with it against the agenda rule."""
import batching
from batching.synthetic import swapped_trees, tree_network

INSTANCES = 64
SYNTHETIC = {"fig1": lambda seed: tree_network(INSTANCES, 8, seed),
             "fig10": lambda seed: swapped_trees(INSTANCES, 8, seed)}
# lattices (155k op-level nodes a scope) take ~10 s a policy, and this file learns 9 per graph:
# they are in `python -m benchmarks --fsm-table`; their cell-style graphs (37k nodes, the
# kind of graph ED-Batch learns on) are here
WORKLOADS = ["treelstm", "treelstm2type", "bilstm"]
CELLS = ["treelstm2type", "latticegru"]
GRAPHS = [*SYNTHETIC, *WORKLOADS, *(f"{name}-cells" for name in CELLS)]
BOUNDS = {"lower-bound": batching.lower_bound, "path-bound": batching.path_bound}
SCHEDULERS = ["depth", "agenda", "sufficient", *(f"fsm-{e}" for e in batching.ENCODINGS), *BOUNDS]


def views(name, seeds):
    """Graphs of ``name`` for each seed (instances drawn with that seed)."""
    if name in SYNTHETIC:
        return [SYNTHETIC[name](seed).view() for seed in seeds]
    import lazyarray as la
    from lazyarray.workloads import WORKLOADS as registry
    name, _, style = name.partition("-")
    w = registry[name]
    params = w.init(32).lazy()
    return [la.record(lambda data: w.scope_loss(params, data, cells=style == "cells"), w.data(INSTANCES, seed))
            for seed in seeds]


def counts(name):
    """scheduler -> batches on the scope of seed 0 (FSM learned on seeds 1 and 2)."""
    view, *train = views(name, (0, 1, 2))
    out = {s: len(batching.resolve(s).schedule(view)) for s in ("depth", "agenda", "sufficient")}
    for encoding in batching.ENCODINGS:
        out[f"fsm-{encoding}"] = len(batching.learn_policy(train, encoding=encoding).schedule(view))
    out.update((name, bound(view)) for name, bound in BOUNDS.items())
    return out


class Batches:
    """Batches of each scheduler (lower is better; ``lower-bound`` no schedule can beat)."""

    params = (GRAPHS, SCHEDULERS)
    param_names = ["graph", "scheduler"]
    timeout = 1800
    unit = "batches"

    def setup_cache(self):
        return {name: counts(name) for name in GRAPHS}

    def track_batches(self, cache, graph, scheduler):
        return cache[graph][scheduler]


class Bounds:
    """Seconds to compute a lower bound of one scope (the path bound is a report, not run time)."""

    params = (GRAPHS, list(BOUNDS))
    param_names = ["graph", "bound"]
    timeout = 600

    def setup(self, graph, bound):
        (self.view,) = views(graph, (0,))

    def time_bound(self, graph, bound):
        BOUNDS[bound](self.view)


class Learning:
    """Seconds to learn a policy on two scopes (ED-Batch Table 3)."""

    params = (GRAPHS, list(batching.ENCODINGS))
    param_names = ["graph", "encoding"]
    timeout = 1800
    number = 1
    repeat = 1

    def setup(self, graph, encoding):
        self.samples = views(graph, (1, 2))

    def time_learn(self, graph, encoding):
        batching.learn_policy(self.samples, encoding=encoding)

    def track_episodes(self, graph, encoding):
        return batching.learn_policy(self.samples, encoding=encoding).stats["episodes"]


class Scheduling:
    """Scheduling a graph the policy never saw (compare fsm with agenda within one run)."""

    params = (WORKLOADS, ["agenda", "fsm"])
    param_names = ["graph", "scheduler"]
    timeout = 600

    def setup(self, graph, scheduler):
        self.view, *train = views(graph, (0, 1, 2))
        self.scheduler = batching.learn_policy(train) if scheduler == "fsm" else batching.resolve(scheduler)

    def time_schedule(self, graph, scheduler):
        self.scheduler.schedule(self.view)
