"""The asv suite stays runnable: every benchmark class, at its first parameter combination (and
one graph where a shared cache would build all of them), through setup, each timed or tracked
method and teardown, as ``asv run`` would call them. CI never runs asv itself."""
import importlib
import inspect
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2] / "asv_bench"
MODULES = sorted(p.stem for p in (ROOT / "suite").glob("*_bench.py"))
KINDS = ("time_", "track_", "peakmem_", "mem_")


def benchmarks():
    sys.path.insert(0, str(ROOT))
    try:
        for name in MODULES:
            module = importlib.import_module(f"suite.{name}")
            for cls in vars(module).values():
                if inspect.isclass(cls) and cls.__module__ == module.__name__ and any(
                        k.startswith(KINDS) for k in dir(cls)):
                    yield pytest.param(module, cls, id=f"{name}.{cls.__name__}")
    finally:
        sys.path.remove(str(ROOT))


@pytest.mark.parametrize("module, cls", list(benchmarks()))
def test_benchmark_runs(module, cls, monkeypatch):
    params = getattr(cls, "params", ())
    if params and not isinstance(params[0], (list, tuple)):
        params = [params]
    first = tuple(p[0] for p in params)
    if hasattr(module, "GRAPHS"):
        monkeypatch.setattr(module, "GRAPHS", module.GRAPHS[:1])
    bench = cls()
    args = (bench.setup_cache(),) + first if hasattr(bench, "setup_cache") else first
    if hasattr(bench, "setup"):
        bench.setup(*args)
    for name in dir(bench):
        if name.startswith(KINDS):
            result = getattr(bench, name)(*args)
            assert result is None or name.startswith("track_") and result >= 0
    if hasattr(bench, "teardown"):
        bench.teardown(*args)


def test_fsm_graphs_of_the_cell_style_models_are_their_cell_graphs():
    sys.path.insert(0, str(ROOT))
    try:
        fsm_bench = importlib.import_module("suite.fsm_bench")
    finally:
        sys.path.remove(str(ROOT))
    (cells,), (ops,) = fsm_bench.views("treelstm2type-cells", (0,)), fsm_bench.views("treelstm2type", (0,))
    assert len(cells) < len(ops) / 3
    # each weight set is a cell type of its own, as each is an op type of its own at op level
    assert sum(label.startswith("cell treelstm2type_internal_node") for label in cells.type_labels) == 2
