"""An interrupt anywhere in ``paused_gc`` leaves the cyclic collector enabled (the soak test
found it left disabled: reference cycles were no longer collected)."""
import gc
import sys

import pytest

from memplan import gcpause


def _interrupted(k):
    """``with paused_gc(): ...`` with KeyboardInterrupt at the k-th line or opcode of gcpause.py
    (-1: never); returns the points seen."""
    count = [0]

    def tracer(frame, event, arg):
        if frame.f_code.co_filename != gcpause.__file__:
            return None
        frame.f_trace_opcodes = True
        if event in ("line", "opcode", "call"):
            count[0] += 1
            if count[0] == k:
                raise KeyboardInterrupt
        return tracer

    sys.settrace(tracer)
    try:
        with gcpause.paused_gc():
            assert not gc.isenabled()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    return count[0]


def test_an_interrupt_anywhere_leaves_the_collector_enabled():
    assert gc.isenabled()
    points = _interrupted(-1)
    assert points > 10
    for k in range(1, points + 1):
        _interrupted(k)
        assert gc.isenabled(), k


def test_a_pause_inside_a_pause_or_with_the_collector_off_changes_nothing():
    with gcpause.paused_gc():
        with gcpause.paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gcpause.paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ValueError):
        with gcpause.paused_gc():
            raise ValueError
    assert gc.isenabled()
