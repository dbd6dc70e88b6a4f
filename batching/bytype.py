"""The agenda's schedule without a frontier, where it batches every type once.

The agenda (``schedulers.AgendaScheduler``) walks a frontier batch by batch: per batch a few
numpy calls, or a Python loop over its nodes, and per flush the frontier's edges built first.
A flush of a few hundred nodes of a handful of types (under ``scope.map``, a parser's step over
every sentence) then cost ~100-150 µs to schedule, more than its kernels' overhead. Where the
agenda takes each type once, its schedule follows from the types alone:

- the order of the batches: at each step the agenda takes the most urgent type with a ready
  node, and it takes each type once only if that type is then wholly ready, so it is the most
  urgent wholly ready type: Kahn's algorithm over the types, most urgent first. Whether the
  agenda splits no type is checked on the same order (no type with a node ready before it is
  taken outranks the type taken then);
- the order inside a batch: the frontier appends nodes as they become ready, in the order of
  the batch that made them ready (a node's last input in it decides, then its id), which keeps
  a consumer's operands in its producers' order (a view, not a gather, in the executor). Found
  as the fixed point of sorting every node by (its type's step, its last input's position,
  its id): one sort per level of the type graph.

A few dozen numpy calls over the nodes and edges, and a loop over the types. Where the agenda
would split a type (a chain's steps read their own type), ``by_type`` returns None and the
frontier runs as before.
"""
from __future__ import annotations

from heapq import heapify, heappop, heappush
from itertools import accumulate

import numpy as np

from .graph import GraphView


def by_type(view: GraphView, rank: list[int]) -> list[np.ndarray] | None:
    """The agenda's batches for ``rank`` (per local type, its place, most urgent first) where
    it takes every type once, else None."""
    n, ntypes = len(view), view.ntypes
    if (n + 1) * n * ntypes >= 1 << 62:     # the sort keys below would overflow int64
        return None
    types = view.types
    src, dst = view.edges
    pairs = types[src] * ntypes + types[dst]
    if ntypes <= 64:    # a bincount of the few possible pairs is cheaper than sorting the edges
        pairs = np.bincount(pairs, minlength=ntypes * ntypes).nonzero()[0].tolist()
    else:
        pairs = np.unique(pairs).tolist()
    waiting, later, level = [0] * ntypes, [[] for _ in range(ntypes)], [0] * ntypes
    for p in pairs:
        t, u = divmod(p, ntypes)
        if t == u:
            return None
        later[t].append(u)
        waiting[u] += 1
    ready = [(rank[t], t) for t in range(ntypes) if not waiting[t]]
    heapify(ready)
    order = []
    while ready:
        t = heappop(ready)[1]
        order.append(t)
        for u in later[t]:
            waiting[u] -= 1
            level[u] = max(level[u], level[t] + 1)
            if not waiting[u]:
                heappush(ready, (rank[u], u))
    if len(order) < ntypes:     # types reading each other in a cycle
        return None
    step = [0] * ntypes
    for k, t in enumerate(order):
        step[t] = k
    node_step = np.array(step)[types]
    first, readers = view.consumers
    if len(src):
        ready_at = np.empty(n, dtype=np.int64)  # the step whose batch makes a node ready
        ready_at.fill(-1)   # (numpy's functions cost more than the work on a small flush: methods)
        ready_at[readers] = np.maximum.reduceat(node_step[src], first)
        if not _takes_once(order, rank, types, ready_at):
            return None
    ids = np.arange(n)
    major = node_step * ((n + 1) * n) + ids
    sequence = major.argsort()
    if len(src):
        position = np.empty(n, dtype=np.int64)
        made = np.empty(n, dtype=np.int64)
        made.fill(-1)
        for _ in range(max(level)):    # a level's order is final once the level above it is
            position[sequence] = ids
            made[readers] = np.maximum.reduceat(position[src], first)
            sequence = (major + (made + 1) * n).argsort()
    cuts = list(accumulate(view.type_counts[t] for t in order))
    return [sequence[lo:hi] for lo, hi in zip([0, *cuts], cuts)]


def _takes_once(order, rank, types, ready_at) -> bool:
    """Whether the agenda, taking the types in ``order``, finds each wholly ready when it takes
    it: no type not yet taken that has a node ready (made ready by an earlier step) outranks
    the one taken."""
    ntypes = len(order)
    earliest = np.empty(ntypes, dtype=np.int64)
    earliest.fill(ntypes)
    np.minimum.at(earliest, types, ready_at)
    touched: list[list[int]] = [[] for _ in range(ntypes + 1)]
    for t, s in enumerate(earliest.tolist()):
        touched[s + 1].append(t)
    live: list[tuple[int, int]] = []
    taken = [False] * ntypes
    for k, t in enumerate(order):
        for u in touched[k]:
            heappush(live, (rank[u], u))
        while live and taken[live[0][1]]:
            heappop(live)
        if live and live[0][1] != t:
            return False
        taken[t] = True
    return True
