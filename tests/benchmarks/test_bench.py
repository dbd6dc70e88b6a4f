import io

import pytest

from benchmarks import bench
from lazyarray.workloads import WORKLOADS

TINY = ["-H", "8", "-B", "2", "--scopes", "1", "--repeats", "1"]


def run(argv):
    out = io.StringIO()
    assert bench.main(argv, out=out) == 0, out.getvalue()
    text = out.getvalue()
    assert "MISMATCH" not in text and "FAILED" not in text, text
    return text


def test_quick_bench_runs_and_checks_every_system():
    text = run(["--quick", "-w", "treelstm", "bilstm", "latticelstm", "treefc",
                "--schedulers", "depth", "agenda", *TINY])
    for title in ("TreeLSTM", "BiLSTM tagger", "LatticeLSTM", "Tree-FC"):
        assert title in text
    for row in ("lazyarray depth", "lazyarray agenda", "eager numpy", "hand-batched levels",
                "hand-batched sorted", "hand-batched padded", "hand-batched steps"):
        assert row in text


def test_parser_rows_and_flushes():
    """map: one flush per step of the longest sentence; without map, one per read of any."""
    text = run(["-w", "parser", *TINY])
    for row in ("lazyarray map ops", "lazyarray map cells", "lazyarray scope without map", "eager numpy",
                "hand-batched lock-step"):
        assert row in text
    flushes = text.split("flushes per scope: ")[1].split("\n")[0]
    counts = dict(part.rsplit(" ", 1) for part in flushes.replace(";", ",").split(", "))
    assert counts["map ops"] == counts["map cells"] == counts["reads of the longest instance"]
    assert counts["scope without map"] == counts["of all"]
    per_flush = text.split("per flush (the first, all the encoders, included): ")[1].split("\n")[0]
    assert [part.split(" schedule ")[0] for part in per_flush.split("; ")] == ["map ops", "map cells",
                                                                              "scope without map"]
    assert all(" us, plan " in part and "cache hits" in part for part in per_flush.split("; "))


def test_fsm_is_timed_or_skipped():
    text = run(["-w", "treefc", "--schedulers", "fsm", *TINY])
    assert "lazyarray fsm" in text


def test_options():
    args = bench.parse_args(["-w", "all", "-H", "16"])
    assert args.H == 16 and args.instances == bench.FULL["instances"] and args.workload == list(WORKLOADS)
    assert bench.parse_args(["--quick"]).repeats == bench.QUICK["repeats"]


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["-B", "-3"]])
def test_counts_below_one_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.parse_args(argv)
    assert exit_.value.code == 2 and "must be at least 1" in capsys.readouterr().err


def test_memplan_table_runs():
    out = io.StringIO()
    assert bench.main(["--memplan-table", "--quick"], out=out) == 0
    assert "TreeLSTM internal" in out.getvalue()


def test_fsm_table_and_memplan_rows_run():
    out = io.StringIO()
    assert bench.main(["--fsm-table", "--quick", "-w", "treelstm"], out=out) == 0
    assert "treelstm" in out.getvalue()
    out = io.StringIO()
    assert bench.main(["--quick", "-w", "treefc", "--memplan", "--schedulers", "agenda"], out=out) == 0
    assert "lazyarray agenda, memplan" in out.getvalue()


def test_micro_prints_per_call_costs_and_the_forcing_curve(monkeypatch):
    from benchmarks import micro
    monkeypatch.setattr(micro, "CALLS", 200)
    out = io.StringIO()
    micro.recording(H=8, repeats=1, out=out)
    micro.forcing(prefixes=(100, 1_000), rounds=3, out=out)
    micro.settings(H=8, instances=2, repeats=1, out=out)
    text = out.getvalue()
    assert "scope: np.tanh(x)" in text and "np.tanh / la.tanh in a scope" in text
    assert "P =   1,000" in text and "(4 flushes)" in text
    assert "collector at 700" in text and "one in flushes" in text and "\n  cells " in text


@pytest.mark.parametrize("fresh, hits", [(False, "100%"), (True, "0%")])
def test_training_on_new_minibatches_misses_the_plan_cache(fresh, hits):
    """``--train --fresh``: every timed step on a minibatch no step ran before, so lazyarray
    schedules and compiles every flush, as a training loop over new data does; without it
    the timed steps replay the cached programs."""
    text = run(["--train", "-w", "treelstm", *TINY, *(["--fresh"] if fresh else [])])
    assert ("a new minibatch every step" in text) == fresh
    assert f"{hits} plan-cache hits" in text.split("lazyarray cells:")[1].splitlines()[0]
