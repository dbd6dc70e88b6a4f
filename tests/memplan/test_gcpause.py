"""An interrupt anywhere in ``paused_gc`` leaves the cyclic collector enabled (the soak test
found it left disabled: reference cycles were no longer collected)."""
import gc
import sys

import pytest

from memplan import gcpause
from tests.signals import raising_at


def _interrupted(k, kept=None):
    """``paused_gc(body)`` interrupted at the k-th point of gcpause.py where CPython would raise
    a signal's exception (-1: never); the exception appended to ``kept``; returns the points
    seen."""
    def body():
        assert not gc.isenabled()

    tracer, count = raising_at(k, gcpause.__file__)
    sys.settrace(tracer)
    try:
        gcpause.paused_gc(body)
    except KeyboardInterrupt as error:
        if kept is not None:
            kept.append(error)
    finally:
        sys.settrace(None)
    return count[0]


def test_an_interrupt_anywhere_leaves_the_collector_enabled():
    assert gc.isenabled()
    points = _interrupted(-1)
    assert points > 5
    for k in range(1, points + 1):
        _interrupted(k)
        assert gc.isenabled(), k


def test_a_pause_inside_a_pause_or_with_the_collector_off_changes_nothing():
    def inner():
        assert not gc.isenabled()

    def outer():
        gcpause.paused_gc(inner)
        assert not gc.isenabled()
        return 7

    assert gcpause.paused_gc(outer) == 7 and gc.isenabled()
    gc.disable()
    try:
        gcpause.paused_gc(inner)
        assert not gc.isenabled()
    finally:
        gc.enable()

    def failing():
        raise ValueError
    with pytest.raises(ValueError):
        gcpause.paused_gc(failing)
    assert gc.isenabled()


def test_overlapping_pauses_of_threads_leave_the_collector_enabled():
    """One thread's pause began while another's held the collector disabled, read it disabled,
    and disabled it again after the other had enabled it: it stayed disabled for good."""
    import threading
    first_in, first_out = threading.Event(), threading.Event()

    def first():
        gcpause.paused_gc(lambda: first_in.set() or first_out.wait(10))

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(10)
    def second():                   # begins while the first is paused
        first_out.set()
        t.join()                    # the first ends inside this one
        assert not gc.isenabled()
    gcpause.paused_gc(second)
    assert gc.isenabled()


def test_an_interrupt_whose_exception_is_kept_in_a_cycle_leaves_the_collector_enabled():
    """The soak test's failure: a signal's exception at the start of the context manager's
    ``__exit__`` skipped the release, and the pause was to end when the manager was dropped; the
    exception's traceback held it, and an exception kept in a reference cycle (a failed scope
    holds its error, whose frames hold the scope) is freed only by the collector, which the
    pause had turned off: off for good. Checked at every point, the collector left off."""
    for k in range(1, _interrupted(-1) + 1):
        kept = []
        _interrupted(k, kept)
        kept.append(kept)       # a cycle through the exception and its frames
        del kept
        assert gc.isenabled(), k
