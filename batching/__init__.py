"""Dataflow-graph scheduling: the recorded graph, signatures interned to ints, schedulers that
group ready nodes of one signature into batches, and ED-Batch's lower bound on batches.
Pure algorithms over integer ids: no array values, no backend."""
from .bound import lower_bound, path_bound
from .graph import PART_BITS, PART_MASK, Graph, GraphView, SignatureTable, gather_ranges
from .schedulers import SCHEDULERS, AgendaScheduler, DepthScheduler, resolve, run_agenda
from .validate import InvalidSchedule, check_schedule
from .encodings import ENCODINGS
from .fsm import FSMPolicy, FSMScheduler, PolicyError, learn_policy, load_policy
from .sufficient import SufficientScheduler

SCHEDULERS.update(sufficient=SufficientScheduler, fsm=FSMScheduler)  # here: they import schedulers
#: Schedulers whose schedules the test suite checks; any other object's are checked as made.
TESTED_SCHEDULERS = frozenset((DepthScheduler, AgendaScheduler, SufficientScheduler, FSMScheduler, FSMPolicy))

__all__ = ["PART_BITS", "PART_MASK", "Graph", "GraphView", "SignatureTable", "gather_ranges",
           "lower_bound", "path_bound", "SCHEDULERS", "AgendaScheduler", "DepthScheduler", "resolve", "run_agenda",
           "InvalidSchedule", "check_schedule", "ENCODINGS", "FSMPolicy", "FSMScheduler", "PolicyError",
           "SufficientScheduler", "TESTED_SCHEDULERS", "learn_policy", "load_policy"]
