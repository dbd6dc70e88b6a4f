"""``python -m lazyarray demo``: counts below one are usage errors, and the hand-batched row comes
from the repository's ``benchmarks`` package where it is importable and is skipped, saying so,
where it is not (an installed lazyarray without the repository)."""
import sys

import pytest

from lazyarray.__main__ import demo

TINY = ["--trees", "2", "--hidden", "8", "--repeats", "1"]


@pytest.mark.parametrize("argv", [["--trees", "0"], ["--hidden", "-1"], ["--repeats", "0"]])
def test_counts_below_one_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        demo(argv)
    assert exit_.value.code == 2 and "must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("importable", [True, False])
def test_hand_batched_row_where_benchmarks_is_importable(importable, monkeypatch, capsys):
    if not importable:
        monkeypatch.setitem(sys.modules, "benchmarks.hand", None)  # import raises ModuleNotFoundError
    assert demo(TINY) == 0
    out = capsys.readouterr().out
    assert ("hand-batched numpy (levels)" in out) == importable
    assert ("hand-batched numpy: skipped" in out) != importable
    assert "losses agree with eager (rtol 1e-4): yes" in out
