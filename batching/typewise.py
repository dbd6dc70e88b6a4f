"""ED-Batch's graphs G^a (§2.3): the a-nodes of a graph, a-node u before a-node v when u is an
ancestor of v through any types (ED-Batch's implementation searches through other types too;
with only direct a-to-a edges an op-level chain, matmul -> add -> tanh -> matmul, would never
satisfy Lemma 1).

What the frontier needs is, per node v, a *covering* set of same-type ancestors: every ancestor
of v's type is in it or behind one in it. Since batching only ever runs nodes whose ancestors
ran, v has no same-type ancestor left exactly when its covering set ran. The nearest ones cover
but can be many: an LSTM's cell state reaches σ(f) of every earlier step with no sigmoid in
between, O(length²) edges. So the backward search from v skips a node x whose first same-type
descendant (the lowest id; ids are a topological order) is known to be an ancestor of v of its
type -- a hit already found, or a hit of such a hit: all behind x is behind it. The search keeps
exact: every edge found is a true same-type ancestor, and a skip drops only covered ones.

Its tables hold a column per type (and a row per node), so it runs on the part of the graph
that lies between two nodes of one type, with types renumbered within each weakly connected
piece of that part (``_colored``): no path joins two pieces, so types of different pieces can
share a column. A scope of many instances of distinct shapes (12,000 types) then needs a few
columns, not one per type: its search cost grew with nodes x types.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import breadth_first_order, connected_components

from .graph import GraphView, gather_ranges

_CELLS = 1 << 23  # nodes x searched types held at once (int64 first-descendant table)


def typewise_successors(view: GraphView, sptr: np.ndarray, succ: np.ndarray):
    """CSR (ptr, waiting) from each node to the same-type nodes that wait on it, and per node
    how many it waits on."""
    src, dst = typewise_inputs(view, sptr, succ)
    n = len(view)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, dst[np.argsort(src, kind="stable")], np.bincount(dst, minlength=n)


def chain_bound(view: GraphView, ptr: np.ndarray, waiting: np.ndarray) -> int:
    """``bound.lower_bound`` from the G^a edges of ``typewise_successors``: the most t-nodes on
    a path is the longest path of G^t (every t-ancestor of v is a covering edge of v or behind
    one), found one depth level at a time (an edge's target is deeper than its source)."""
    n = len(view)
    if not n:
        return 0
    chain = np.ones(n, dtype=np.int64)
    src = np.repeat(np.arange(n), np.diff(ptr))
    if len(src):
        level = view.depth[src]
        order = np.argsort(level, kind="stable")
        src, dst, level = src[order], waiting[order], level[order]
        cuts = [0, *(np.flatnonzero(level[1:] != level[:-1]) + 1).tolist(), len(src)]
        for lo, hi in zip(cuts, cuts[1:]):
            np.maximum.at(chain, dst[lo:hi], chain[src[lo:hi]] + 1)
    longest = np.zeros(view.ntypes, dtype=np.int64)
    np.maximum.at(longest, view.types, chain)
    return int(longest.sum())


def typewise_inputs(view: GraphView, sptr: np.ndarray, succ: np.ndarray):
    """Edges (src, dst): src of dst's type covers dst's same-type ancestors (module doc)."""
    part, nodes, sptr, succ = _colored(view, sptr, succ)
    n, types = len(part), part.types
    if not n:
        return nodes, nodes
    anc = _ancestor_types(part)
    start = np.flatnonzero(_has_type(anc, np.arange(n), types))
    searched = np.unique(types[start])
    step = max(1, _CELLS // max(n, 1))
    found = [np.zeros(0, dtype=np.int64)]
    for lo in range(0, len(searched), step):
        column = np.full(part.ntypes, -1)
        column[searched[lo:lo + step]] = np.arange(len(searched[lo:lo + step]))
        mine = start[column[types[start]] >= 0]
        found.append(_search(part, anc, _first_descendants(part, sptr, succ, column), column, mine))
    key = np.concatenate(found)
    return nodes[key % n], nodes[key // n]


class _Part:
    """What the search reads of a graph (``types``, ``ntypes``, ``depth``, ``indptr``,
    ``indices``), for the part of one that ``_colored`` keeps."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __len__(self):
        return len(self.types)


def _colored(view: GraphView, sptr: np.ndarray, succ: np.ndarray):
    """(part, its nodes' ids in ``view``, its consumer CSR): the nodes both below and above a
    node of a type with several nodes (a path between two a-nodes runs through such nodes
    only), with induced edges and each type renumbered within its weakly connected piece."""
    n, types = len(view), view.types
    seeds = np.flatnonzero(np.bincount(types, minlength=view.ntypes)[types] > 1)
    nodes = np.flatnonzero(_reach(view.indptr, view.indices, seeds) & _reach(sptr, succ, seeds))
    local = np.full(n, -1, dtype=np.int64)
    local[nodes] = np.arange(len(nodes))
    indptr, indices = _induced(view.indptr, view.indices, nodes, local)
    sptr, succ = _induced(sptr, succ, nodes, local)
    deps = scipy.sparse.csr_array((np.ones(len(indices), dtype=np.int8), indices, indptr), shape=(len(nodes),) * 2)
    piece = connected_components(deps, connection="weak")[1].astype(np.int64)
    pairs, color = np.unique(piece * view.ntypes + types[nodes], return_inverse=True)
    color = color.reshape(-1) - np.searchsorted(pairs, piece * view.ntypes)  # 0.. within each piece
    part = _Part(types=color, ntypes=int(color.max(initial=-1)) + 1, depth=view.depth[nodes], indptr=indptr,
                 indices=indices)
    return part, nodes, sptr, succ


def _reach(ptr: np.ndarray, targets: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Per node, whether a path along the CSR (ptr, targets) leads to it from ``seeds`` (them
    included): scipy's breadth-first search from a root added before the seeds."""
    n = len(ptr) - 1
    graph = scipy.sparse.csr_array((np.ones(len(targets) + len(seeds), dtype=np.int8),
                                    np.concatenate([targets, seeds]), np.append(ptr, ptr[-1] + len(seeds))),
                                   shape=(n + 1, n + 1))
    reached = np.zeros(n + 1, dtype=bool)
    reached[breadth_first_order(graph, n, return_predecessors=False)] = True
    return reached[:n]


def _induced(ptr: np.ndarray, targets: np.ndarray, nodes: np.ndarray, local: np.ndarray):
    """The CSR (ptr, targets) restricted to ``nodes``, renumbered by ``local`` (-1: dropped)."""
    counts = np.diff(ptr)[nodes]
    kept = local[gather_ranges(ptr, targets, nodes)]
    mine = kept >= 0
    sub = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum(np.bincount(np.repeat(np.arange(len(nodes)), counts)[mine], minlength=len(nodes)), out=sub[1:])
    return sub, kept[mine]


def _search(view, anc, first, column, start):
    """Backward search from every node of ``start`` at once, deepest nodes first (so a node's
    descendants in the search come before it): stop at nodes of the start's type (hits), go on
    only through nodes whose ancestors hold that type and whose first descendant of that type is
    not known to be an ancestor of the start: a hit, or a hit of a hit (an LSTM's h path runs
    beside its tanh chain: tanh(u_t) is behind the hit tanh(c_t)). A hit behind a node is found
    at a deeper level than the node's, so each level asks only about hits already recorded."""
    n, types, depth = len(view), view.types, view.depth
    ndeps = np.diff(view.indptr)
    hits = _Hits(n)
    buckets: list[list] = [[] for _ in range(int(depth.max()) + 1)]

    def push(dst, src):
        want = types[dst]
        hit = types[src] == want
        if hit.any():
            hits.add(dst[hit] * n + src[hit])
        go = ~hit & _has_type(anc, src, want)
        dst, src = dst[go], src[go]
        if not len(src):
            return
        level = depth[src]
        order = np.argsort(level, kind="stable")
        dst, src, level = dst[order], src[order], level[order]
        cuts = [0, *(np.flatnonzero(level[1:] != level[:-1]) + 1).tolist(), len(src)]
        for lo, hi in zip(cuts, cuts[1:]):
            buckets[level[lo]].append(dst[lo:hi] * n + src[lo:hi])

    push(np.repeat(start, ndeps[start]), gather_ranges(view.indptr, view.indices, start))
    for level in reversed(buckets):
        if not level:
            continue
        key = _distinct(np.concatenate(level))
        dst, src = key // n, key % n
        behind = first[src, column[types[dst]]]
        ask = np.flatnonzero(behind != dst)  # most often the start itself comes first: no skip
        if len(ask):
            go = np.ones(len(src), dtype=bool)
            go[ask] = ~hits.behind(dst[ask], behind[ask])
            dst, src = dst[go], src[go]
        push(np.repeat(dst, ndeps[src]), gather_ranges(view.indptr, view.indices, src))
    return hits.keys()


class _Hits:
    """Each node's hits so far: the first ``WIDTH`` in a row of a dense table, so that a level's
    questions (is e a hit of v, or of one of v's hits?) are a few array compares; the rest, rare,
    in Python sets. Asked one by one in Python, the questions were half of the search. Row -1
    is all -1: a row's unused slots index it and match no node."""

    WIDTH = 8  # TreeLSTM's nodes have up to 8 hits, LatticeLSTM's 9
    CHUNK = 1 << 15  # questions at once: at most 16 MiB of hits' hits

    def __init__(self, n: int):
        self.n = n
        self.table = np.full((n + 1, self.WIDTH), -1, dtype=np.int64)
        self.count = np.zeros(n + 1, dtype=np.int64)
        self.more: dict[int, set] = {}  # v -> its hits past the table's row

    def add(self, key: np.ndarray):
        """Record the hits ``v * n + u``."""
        key = _distinct(key)
        dst, src = key // self.n, key % self.n
        new = ~(self.table[dst] == src[:, None]).any(axis=1)  # one found before, by a longer path
        dst, src = dst[new], src[new]
        if not len(dst):
            return
        first = np.empty(len(dst), dtype=bool)  # sorted by dst: a run per node
        first[0] = True
        np.not_equal(dst[1:], dst[:-1], out=first[1:])
        at = np.arange(len(dst))
        slot = self.count[dst] + at - at[first][np.cumsum(first) - 1]
        last = np.empty(len(dst), dtype=bool)
        last[-1] = True
        last[:-1] = first[1:]
        self.count[dst[last]] = slot[last] + 1
        fits = slot < self.WIDTH
        self.table[dst[fits], slot[fits]] = src[fits]
        for v, u in zip(dst[~fits].tolist(), src[~fits].tolist()):
            self.more.setdefault(v, set()).add(u)

    def behind(self, dst: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Whether e is a hit of dst, or a hit of one of dst's hits (in chunks: a hit's hits
        are read as a chunk x WIDTH x WIDTH block)."""
        return np.concatenate([self._behind_rows(dst[lo:lo + self.CHUNK], e[lo:lo + self.CHUNK])
                               for lo in range(0, len(dst), self.CHUNK)] or [np.zeros(0, dtype=bool)])

    def _behind_rows(self, dst: np.ndarray, e: np.ndarray) -> np.ndarray:
        width = min(self.WIDTH, int(self.count[dst].max(initial=0)))
        rows = self.table[dst, :width]
        out = (rows == e[:, None]).any(axis=1)
        rest = np.flatnonzero(~out)
        rows, e = rows[rest], e[rest]
        deeper = min(self.WIDTH, int(self.count[rows].max(initial=0)))
        if deeper:
            out[rest] = (self.table[rows, :deeper] == e[:, None, None]).any(axis=(1, 2))
        if self.more:  # the rows whose hits, or their hits' hits, go past the table
            ask = ~out[rest] & ((self.count[dst[rest]] > self.WIDTH) | (self.count[rows] > self.WIDTH).any(axis=1))
            out[rest[ask]] = [self._behind(v, u) for v, u in zip(dst[rest[ask]].tolist(), e[ask].tolist())]
        return out

    def keys(self) -> np.ndarray:
        """Every hit, as ``v * n + u``, ascending."""
        dst, slot = np.nonzero(self.table >= 0)
        more = [v * self.n + u for v, us in self.more.items() for u in us]
        return np.sort(np.concatenate([dst * self.n + self.table[dst, slot], np.array(more, dtype=np.int64)]))

    def _of(self, v: int) -> set:
        return {*self.table[v][self.table[v] >= 0].tolist(), *self.more.get(v, ())}

    def _behind(self, v: int, e: int) -> bool:
        mine = self._of(v)
        return e in mine or any(e in self._of(h) for h in mine)


def _distinct(keys: np.ndarray) -> np.ndarray:
    """``np.unique(keys)`` by a sort: numpy 2.4's hashing one costs 5-9x more on the hundreds to
    tens of thousands of keys the search dedups at a time."""
    keys = np.sort(keys)
    keep = np.empty(len(keys), dtype=bool)
    keep[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def _first_descendants(view, sptr, succ, column) -> np.ndarray:
    """[node, column[t]]: the lowest id among the first t-nodes on paths down from the node
    (``n`` if none), one depth level at a time, deepest first (consumers are always deeper)."""
    n, types = len(view), view.types
    first = np.full((n, int(column.max()) + 1), n, dtype=np.int64)
    nsucc = np.diff(sptr)
    order = np.argsort(-view.depth, kind="stable")
    for level in np.split(order, np.flatnonzero(np.diff(view.depth[order])) + 1):
        outer = level[nsucc[level] > 0]
        if len(outer):
            rows = first[gather_ranges(sptr, succ, outer)]
            first[outer] = np.minimum.reduceat(rows, np.cumsum(nsucc[outer]) - nsucc[outer], axis=0)
        own = level[column[types[level]] >= 0]
        first[own, column[types[own]]] = own
    return first


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
