"""ED-Batch Alg. 1 as an environment: the frontier (ready nodes) of a graph being batched one type
at a time, kept per type and updated incrementally, batch by batch: numpy index arrays for big
batches, plain Python for a handful of nodes. An episode costs O(nodes + edges).

With ``typewise=True`` it also keeps, per type a, |Frontier(G^a)|: the a-nodes with no remaining
a-ancestor (see ``typewise``), at a cost of O(a few edges per node) per episode, and the lower
bound (A.3) read off the same G^a edges.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from heapq import heappop, heappush

import numpy as np

from .graph import GraphView
from .schedulers import agenda_rank
from .typewise import chain_bound, typewise_successors

_SMALL = 24  # batches up to this size are advanced in plain Python


class Frontier:
    """Reset, then ``take(t)`` until ``done == n``. Per local type: ``ready[t]`` (chunks of node
    ids), ``count[t]`` (ready nodes), and with ``typewise`` ``front[t]`` = |Frontier(G^t)|;
    ``first()`` is the most urgent type with ready nodes: the lowest ``rank`` (per local type,
    its place in an order; the agenda's by default), with ``typewise`` the highest ``ratio``
    first (§5.3's heuristic), kept in a heap: a scan of every such type at every step is
    quadratic in types (12,000 distinct shapes took 23 s). Counts are Python ints: rewards read
    them every step.

    Given ``gid`` (per local type, its id in a policy's vocabulary), it keeps ``order`` instead
    of the heap: the live types' ids, most common first, ties by id -- E_sort's state
    (``encodings``). Each step moves the types it changed (the type taken, the types that got
    ready nodes) with ``bisect``: sorting every live type at every step cost op-level lattices
    (30 live types on average) more than the rest of the step; a type that gets nodes mostly
    passes no other and keeps its place."""

    def __init__(self, view: GraphView, typewise: bool = False, gid: list[int] | None = None,
                 rank: list[int] | None = None):
        self.gid = gid
        if gid is None:
            self.rank = agenda_rank(view) if rank is None else rank
        self.spread = max(gid, default=0) + 1 if gid is not None else 0
        self.n, self.ntypes, self.types = len(view), view.ntypes, view.types
        self.type_list = array("q", view.types.tobytes())
        sptr, succ = view.successors()
        self.consumers = _Edges(sptr, succ)
        self.pending0 = np.diff(view.indptr)
        self.scratch = np.empty(self.n, dtype=np.int64)
        self.typewise = typewise
        if typewise:
            ptr, later, self.tpending0 = typewise_successors(view, sptr, succ)
            self.later = _Edges(ptr, later)
            self.bound = chain_bound(view, ptr, later)  # = bound.lower_bound(view), from G^a
            blocked = np.bincount(view.types[self.tpending0 > 0], minlength=self.ntypes)
            self.front0 = (np.bincount(view.types, minlength=self.ntypes) - blocked).tolist()
        self.spent = self.done = 0
        self.reset()

    def reset(self):
        self.spent += self.done  # nodes batched by earlier rollouts: learning's work budget
        # pending counts live in array('q') buffers, which ``_take_few`` indexes as fast as a list
        # (numpy scalar indexing costs several times more); ``take`` updates the same memory
        # through a numpy view of it
        self._pending = array("q", self.pending0.tobytes())
        self.pending = np.frombuffer(self._pending, dtype=np.int64)
        self.ready = [[] for _ in range(self.ntypes)]
        self.count = [0] * self.ntypes
        self.done = 0
        if self.gid is None:
            # (rank, t), with typewise (-ratio, rank, t): pushed as a type gets ready nodes (its
            # key changes only then, or when taken); ``first`` drops the stale ones
            self.queue: list[tuple] = []
        else:
            self.order: list[int] = []
            self._keys: list[int] = []  # gid - count * spread, ascending, parallel to ``order``
        if self.typewise:
            self._tpending = array("q", self.tpending0.tobytes())
            self.tpending = np.frombuffer(self._tpending, dtype=np.int64)
            self.front = list(self.front0)
        self._enqueue(np.flatnonzero(self.pending == 0))

    def ratio(self, t: int) -> float:
        """Eq. 1's second term, |Frontier_t(G)| / |Frontier(G^t)|: 1 when every t-node that
        could be in t's next batch is ready now (Lemma 1)."""
        return self.count[t] / self.front[t]

    def first(self) -> int:
        """The most urgent type with ready nodes (without ``gid``; see the class doc)."""
        queue, count = self.queue, self.count
        if not self.typewise:
            while not count[queue[0][-1]]:  # taken since it was pushed
                heappop(queue)
            return queue[0][-1]
        front = self.front
        while True:
            ratio, _, t = queue[0]
            if count[t] and -ratio == count[t] / front[t]:  # else taken or grown since
                return t
            heappop(queue)

    def take(self, t: int) -> np.ndarray:
        """Batch every ready node of type ``t`` and advance the frontier."""
        chunks = self.ready[t]
        batch = np.asarray(chunks[0]) if len(chunks) == 1 else np.concatenate(chunks)
        self.ready[t] = []
        if self.gid is not None:
            i = bisect_left(self._keys, self.gid[t] - self.count[t] * self.spread)
            del self._keys[i], self.order[i]
        self.count[t] = 0
        self.done += len(batch)
        if len(batch) <= _SMALL:
            self._take_few(t, batch.tolist())
            return batch
        if self.typewise:  # before the new ready nodes: their heap keys read t's front
            later = self.later.of(batch)
            self.front[t] += (len(self._release(self.tpending, later)) if len(later) else 0) - len(batch)
        consumers = self.consumers.of(batch)
        if len(consumers):
            self._enqueue(self._release(self.pending, consumers))
        return batch

    def _take_few(self, t: int, batch: list[int]):
        """``take`` for a handful of nodes (chains, lattices): plain Python beats numpy's
        per-call cost there."""
        if self.typewise:  # before the new ready nodes, as in ``take``
            tpending, bounds, later = self._tpending, self.later.bounds, self.later.targets
            front = self.front[t] - len(batch)
            for v in batch:
                for c in later[bounds[v]:bounds[v + 1]]:
                    left = tpending[c] - 1
                    tpending[c] = left
                    front += not left
            self.front[t] = front
        pending, types = self._pending, self.type_list
        bounds, succ = self.consumers.bounds, self.consumers.targets
        fresh: dict[int, list[int]] = {}
        for v in batch:
            for c in succ[bounds[v]:bounds[v + 1]]:
                left = pending[c] - 1
                pending[c] = left
                if not left:
                    fresh.setdefault(types[c], []).append(c)
        for ty, nodes in fresh.items():
            self._add(ty, nodes)

    def _release(self, pending: np.ndarray, consumers: np.ndarray) -> np.ndarray:
        """Decrement ``pending`` once per occurrence in ``consumers``; the nodes that reach zero,
        once each."""
        np.subtract.at(pending, consumers, 1)
        zero = consumers[pending[consumers] == 0]
        if len(zero) > 1:
            last = self.scratch
            last[zero] = at = np.arange(len(zero))
            zero = zero[last[zero] == at]
        return zero

    def _enqueue(self, nodes: np.ndarray):
        if not len(nodes):
            return
        types = self.types[nodes]
        first = int(types[0])
        if len(nodes) == 1 or (types == first).all():
            self._add(first, nodes)
            return
        order = types.argsort(kind="stable")  # array methods: np.argsort & co. add a wrapper call
        nodes, types = nodes[order], types[order]
        cuts = [0, *((types[1:] != types[:-1]).nonzero()[0] + 1).tolist(), len(nodes)]
        for lo, hi in zip(cuts, cuts[1:]):
            self._add(int(types[lo]), nodes[lo:hi])

    def _add(self, t: int, nodes):
        self.ready[t].append(nodes)
        count = self.count[t]
        total = self.count[t] = count + len(nodes)
        if self.gid is None:
            if self.typewise:
                heappush(self.queue, (-total / self.front[t], self.rank[t], t))
            elif not count:
                heappush(self.queue, (self.rank[t], t))
            return
        keys, g, spread = self._keys, self.gid[t], self.spread  # t's key falls to g - total * spread
        key = g - total * spread
        if count:
            i = bisect_left(keys, g - count * spread)
            if not i or keys[i - 1] < key:  # passes no other type: stays in place
                keys[i] = key
                return
            del keys[i], self.order[i]
            i = bisect_left(keys, key, 0, i)
        else:
            i = bisect_left(keys, key)
        keys.insert(i, key)
        self.order.insert(i, g)


class _Edges:
    """CSR adjacency, as numpy arrays for batches and as ``array('q')`` for ``_take_few``
    (lists cost a Python int per edge up front: a third of scheduling a tree scope)."""

    __slots__ = ("bounds", "targets", "start", "size", "dst")

    def __init__(self, ptr: np.ndarray, dst: np.ndarray):
        self.bounds, self.targets = array("q", ptr.tobytes()), array("q", dst.tobytes())
        self.start, self.size, self.dst = ptr[:-1], np.diff(ptr), dst

    def of(self, nodes: np.ndarray) -> np.ndarray:
        """``gather_ranges(ptr, dst, nodes)``."""
        sizes = self.size[nodes]
        ends = sizes.cumsum()
        total = int(ends[-1])
        if not total:
            return self.dst[:0]
        return self.dst[(self.start[nodes] - ends + sizes).repeat(sizes) + np.arange(total)]


def rollout(frontier: Frontier, choose) -> list[np.ndarray]:
    """Alg. 1: batch the type ``choose(frontier)`` picks until every node is batched."""
    if frontier.done:  # a new frontier is reset already
        frontier.reset()
    batches = []
    while frontier.done < frontier.n:
        batches.append(frontier.take(choose(frontier)))
    return batches
