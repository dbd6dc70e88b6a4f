"""An interrupt anywhere in ``paused_gc`` leaves the cyclic collector enabled (the soak test
found it left disabled: reference cycles were no longer collected)."""
import gc
import sys
import weakref

import pytest

from memplan import gcpause
from tests.signals import raising_at


def _in_finalizer(frame) -> bool:
    """Python discards exceptions raised in a weak reference's callback (where a pause whose
    ``__exit__`` never ran ends): no interrupt is raised there."""
    while frame is not None:
        if frame.f_code.co_filename == weakref.__file__:
            return True
        frame = frame.f_back
    return False


def _interrupted(k):
    """``with paused_gc(): ...`` interrupted at the k-th point of gcpause.py where CPython would
    raise a signal's exception (-1: never), the start of ``__exit__`` included; returns the
    points seen."""
    tracer, count = raising_at(k, gcpause.__file__, _in_finalizer)
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
    assert points > 5
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


def test_overlapping_pauses_of_threads_leave_the_collector_enabled():
    """One thread's pause began while another's held the collector disabled, read it disabled,
    and disabled it again after the other had enabled it: it stayed disabled for good."""
    import threading
    first_in, first_out = threading.Event(), threading.Event()

    def first():
        with gcpause.paused_gc():
            first_in.set()
            first_out.wait(10)

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(10)
    with gcpause.paused_gc():       # begins while the first is paused
        first_out.set()
        t.join()                    # the first ends inside this one
        assert not gc.isenabled()
    assert gc.isenabled()
