"""Dataflow-graph scheduling: the recorded graph, signatures interned to ints, schedulers that
group ready nodes of one signature into batches, and ED-Batch's lower bound on batches.
Pure algorithms over integer ids: no array values, no backend."""
from .bound import lower_bound
from .graph import PART_BITS, PART_MASK, Graph, GraphView, SignatureTable, gather_ranges
from .schedulers import SCHEDULERS, AgendaScheduler, DepthScheduler, resolve, run_agenda

__all__ = ["PART_BITS", "PART_MASK", "Graph", "GraphView", "SignatureTable", "gather_ranges",
           "lower_bound", "SCHEDULERS", "AgendaScheduler", "DepthScheduler", "resolve", "run_agenda"]
