"""The compiled recording stubs against the same stubs run as Python (``python -m benchmarks
--compiled``): per-op and per-cell-call recording costs (a cell of two futures; TreeLSTM's node
cell: a bundle, six futures and a label in, three outputs) and op-level / cell scopes of the
reference workloads, each measured in a fresh process, the two paths alternating
(``LAZYARRAY_PURE_PYTHON=1`` for the pure one) so that both see the same machine state; medians
over rounds."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

_CHILD = r"""
import json, statistics, sys, time, timeit
import numpy as np
import lazyarray as la
from lazyarray.workloads import WORKLOADS
from lazyarray.workloads.cell_style import treelstm_internal_node as node, treelstm_leaf_node
H, n, workloads = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
out = {"compiled": la.compiled}
x0, W, b = np.ones(H, np.float32), la.parameter(np.eye(H, dtype=np.float32)), la.parameter(np.zeros(H, np.float32))
step = la.cell(lambda x, h: la.tanh(x + h))
tree = WORKLOADS["treelstm"].init(H, seed=0).lazy()
with la.no_grad(), la.batching() as scope:
    y = la.tanh(la.array(x0))
    h, c, loss = treelstm_leaf_node(tree, 3, 1)
    for label, f in (("la.tanh(x)", lambda: la.tanh(y)), ("x * y", lambda: y * y), ("x + 1.0", lambda: y + 1.0),
                     ("W @ x + b", lambda: W @ y + b), ("np.tanh(x)", lambda: np.tanh(y)),
                     ("cell(x, y)", lambda: step(y, y)),
                     ("TreeLSTM node cell", lambda: node(tree, h, c, loss, h, c, loss, 2))):
        f()     # the first call traces the body
        out[label] = min(timeit.repeat(f, number=3000, repeat=5)) / 3000 * 1e9
    scope.discard()
for name in workloads:
    w = WORKLOADS[name]
    lazy, data = w.init(H, seed=0).lazy(), w.data(n, seed=0)
    for cells in (False, True) if w.cells is not None else (False,):
        times, record = [], []
        for _ in range(4):
            start = time.perf_counter()
            with la.no_grad(), la.batching() as scope:
                loss = w.scope_loss(lazy, data, cells=cells)
            float(la.sum(loss) if loss.shape else loss)
            times.append(time.perf_counter() - start)
            record.append(scope.stats.times["record"])
        key = f"{name} {'cells' if cells else 'ops'}"
        out[key] = 1e3 * statistics.median(times[1:])
        out[key + " record"] = 1e3 * statistics.median(record[1:])
print(json.dumps(out))
"""


def run(H=128, instances=64, workloads=("treelstm", "bilstm", "treefc"), rounds=3, out=sys.stdout):
    got = {"pure": [], "compiled": []}
    for _ in range(rounds):
        for path in got:
            env = dict(os.environ)
            env.pop("LAZYARRAY_PURE_PYTHON", None)
            if path == "pure":
                env["LAZYARRAY_PURE_PYTHON"] = "1"
            text = subprocess.run([sys.executable, "-c", _CHILD, str(H), str(instances), *workloads], env=env,
                                  check=True, capture_output=True, text=True).stdout
            got[path].append(json.loads(text.splitlines()[-1]))
    if not all(r["compiled"] for r in got["compiled"]):
        print("the compiled recorders are not built (pip install -e . with Cython and a C compiler): "
              "nothing to compare", file=out)
        return 1
    print(f"\nRecording compiled vs pure Python, H={H}, {instances} instances a scope, medians of {rounds} "
          f"alternating rounds (fresh processes)", file=out)
    print(f"  {'':<26}{'pure':>10}{'compiled':>10}{'ratio':>8}", file=out)
    for key in got["pure"][0]:
        if key == "compiled":
            continue
        pure = statistics.median(r[key] for r in got["pure"])
        comp = statistics.median(r[key] for r in got["compiled"])
        unit = "ms" if " ops" in key or " cells" in key else "ns"
        print(f"  {key + ' (' + unit + ')':<26}{pure:>10.1f}{comp:>10.1f}{comp / pure:>7.2f}x", file=out)
    return 0
