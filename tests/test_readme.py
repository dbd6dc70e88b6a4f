"""The README's code blocks run as written, in order and in one namespace, and the quickstart's
batched loss equals the same code run eagerly."""
import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_code_runs_and_quickstart_matches_eager(tmp_path, monkeypatch, capsys):
    if not README.exists():
        pytest.skip("README.md is not beside the tests")
    quickstart, *rest = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(rest) >= 2           # the cell, learned policies, ...
    monkeypatch.chdir(tmp_path)     # the policy example saves a file
    env = {}
    exec(compile(quickstart, str(README), "exec"), env)
    eager = sum(float(env["encode"](tree)[2]) for tree in env["trees"])
    np.testing.assert_allclose(float(env["total"]), eager, rtol=1e-5)
    assert "lower bound" in capsys.readouterr().out
    for block in rest:
        exec(compile(block, str(README), "exec"), env)
        if "scope.map" in block:    # before a later block trains the model
            assert env["read"] == [env["read_until_sure"](s) for s in env["sentences"]]
    assert (tmp_path / "treelstm.policy.json").exists()
