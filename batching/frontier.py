"""ED-Batch Alg. 1 as an environment: the frontier (ready nodes) of a graph being batched one type
at a time, kept per type and updated incrementally, batch by batch, with numpy index arrays.

With ``typewise=True`` it also keeps, per type a, |Frontier(G^a)|: the a-nodes with no remaining
a-ancestor. G^a keeps reachability through other types (as ED-Batch's implementation does): with
only direct a-to-a edges an op-level chain (matmul -> add -> tanh -> matmul) would never let
Lemma 1 fire. Each a-node waits on its nearest a-ancestors (``typewise_inputs``), so keeping the
count costs O(those edges) per episode.
"""
from __future__ import annotations

import numpy as np

from .graph import GraphView, gather_ranges
from .schedulers import AgendaScheduler


class Frontier:
    """Reset, then ``take(t)`` until ``done == n``. Per local type: ``ready[t]`` (chunks of node
    ids), ``count[t]`` (ready nodes), and with ``typewise`` ``front[t]`` = |Frontier(G^t)|;
    ``live`` is the set of types with ready nodes. Counts are Python ints: encodings and rewards
    read them every step."""

    def __init__(self, view: GraphView, typewise: bool = False):
        self.n, self.ntypes, self.types = len(view), view.ntypes, view.types
        self.consumers = _Edges(*view.successors())
        self.pending0 = np.diff(view.indptr)
        self.scratch = np.empty(self.n, dtype=np.int64)
        self.typewise = typewise
        if typewise:
            ptr, succ, self.tpending0 = typewise_successors(view)
            self.later = _Edges(ptr, succ)
            blocked = np.bincount(view.types[self.tpending0 > 0], minlength=self.ntypes)
            self.front0 = (np.bincount(view.types, minlength=self.ntypes) - blocked).tolist()
        self.reset()

    def reset(self):
        self.pending = self.pending0.copy()
        self.ready = [[] for _ in range(self.ntypes)]
        self.count = [0] * self.ntypes
        self.live: set[int] = set()
        self.done = 0
        if self.typewise:
            self.tpending = self.tpending0.copy()
            self.front = list(self.front0)
        self._enqueue(np.flatnonzero(self.pending == 0))

    def ratio(self, t: int) -> float:
        """Eq. 1's second term, |Frontier_t(G)| / |Frontier(G^t)|: 1 when every t-node that
        could be in t's next batch is ready now (Lemma 1)."""
        return self.count[t] / self.front[t]

    def take(self, t: int) -> np.ndarray:
        """Batch every ready node of type ``t`` and advance the frontier."""
        chunks = self.ready[t]
        batch = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
        self.ready[t] = []
        self.count[t] = 0
        self.live.discard(t)
        self.done += len(batch)
        consumers = self.consumers.of(batch)
        if len(consumers):
            self._enqueue(self._release(self.pending, consumers))
        if self.typewise:
            later = self.later.of(batch)
            self.front[t] += (len(self._release(self.tpending, later)) if len(later) else 0) - len(batch)
        return batch

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
        order = np.argsort(types, kind="stable")
        nodes, types = nodes[order], types[order]
        cuts = [0, *(np.flatnonzero(types[1:] != types[:-1]) + 1).tolist(), len(nodes)]
        for lo, hi in zip(cuts, cuts[1:]):
            self._add(int(types[lo]), nodes[lo:hi])

    def _add(self, t: int, nodes: np.ndarray):
        self.ready[t].append(nodes)
        self.count[t] += len(nodes)
        self.live.add(t)


class _Edges:
    """CSR adjacency: ``gather_ranges`` with a plain slice for a single node (the batches of
    chains)."""

    __slots__ = ("bounds", "start", "size", "dst")

    def __init__(self, ptr: np.ndarray, dst: np.ndarray):
        self.bounds, self.start, self.size, self.dst = ptr.tolist(), ptr[:-1], np.diff(ptr), dst

    def of(self, nodes: np.ndarray) -> np.ndarray:
        if len(nodes) == 1:
            v = int(nodes[0])
            return self.dst[self.bounds[v]:self.bounds[v + 1]]
        sizes = self.size[nodes]
        ends = np.cumsum(sizes)
        total = int(ends[-1])
        if not total:
            return self.dst[:0]
        return self.dst[np.repeat(self.start[nodes] - ends + sizes, sizes) + np.arange(total)]


def typewise_successors(view: GraphView):
    """CSR (ptr, succ) from each node to the same-type nodes that wait on it, and per node how
    many it waits on (its nearest same-type ancestors)."""
    src, dst = typewise_inputs(view)
    n = len(view)
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, dst[order], np.bincount(dst, minlength=n)


def typewise_inputs(view: GraphView):
    """Edges (src, dst) of the graphs G^a: src is a nearest ancestor of dst of dst's own type
    (no node of that type on the path between). A backward search from every node with a
    same-type ancestor, all nodes at once, one edge per round; a node is expanded only if its
    ancestors include the type searched for, so the search visits only paths that end in a hit."""
    n, types = len(view), view.types
    anc = _ancestor_types(view)
    ndeps = np.diff(view.indptr)
    start = np.flatnonzero(_has_type(anc, np.arange(n), types))
    dst = np.repeat(start, ndeps[start])
    src = gather_ranges(view.indptr, view.indices, start)
    found = []
    while len(src):
        want = types[dst]
        hit = types[src] == want
        found.append(dst[hit] * n + src[hit])
        go = ~hit & _has_type(anc, src, want)
        key = np.unique(dst[go] * n + src[go])
        dst, src = key // n, key % n
        dst = np.repeat(dst, ndeps[src])
        src = gather_ranges(view.indptr, view.indices, src)
    key = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    return key % n, key // n


def _ancestor_types(view: GraphView) -> np.ndarray:
    """Per node, a bit set (uint64 words) of the types among its strict ancestors, one depth
    level at a time (inputs are always shallower)."""
    n, words = len(view), (view.ntypes + 63) // 64
    own = np.zeros((n, words), dtype=np.uint64)
    own[np.arange(n), view.types >> 6] = np.left_shift(np.uint64(1), (view.types & 63).astype(np.uint64))
    anc = np.zeros_like(own)
    ndeps = np.diff(view.indptr)
    order = np.argsort(view.depth, kind="stable")
    for level in np.split(order, np.flatnonzero(np.diff(view.depth[order])) + 1):
        inner = level[ndeps[level] > 0]
        if len(inner):
            inputs = gather_ranges(view.indptr, view.indices, inner)
            rows = anc[inputs] | own[inputs]
            anc[inner] = np.bitwise_or.reduceat(rows, np.cumsum(ndeps[inner]) - ndeps[inner], axis=0)
    return anc


def _has_type(anc: np.ndarray, nodes: np.ndarray, types: np.ndarray) -> np.ndarray:
    """Whether type ``types[i]`` is among the ancestors of ``nodes[i]``."""
    words = anc[nodes, types >> 6]
    return ((words >> (types & 63).astype(np.uint64)) & np.uint64(1)).astype(bool)


def rollout(frontier: Frontier, choose) -> list[np.ndarray]:
    """Alg. 1: batch the type ``choose(frontier)`` picks until every node is batched."""
    frontier.reset()
    batches = []
    while frontier.done < frontier.n:
        batches.append(frontier.take(choose(frontier)))
    return batches


def agenda_rank(view: GraphView) -> list[int]:
    """Per local type, its place in the agenda order (DyNet: lowest average depth first, cheap
    before heavy): the tie-break and the fallback of the learned schedulers."""
    rank = np.empty(view.ntypes, dtype=np.int64)
    rank[AgendaScheduler().priorities(view)] = np.arange(view.ntypes)
    return rank.tolist()
