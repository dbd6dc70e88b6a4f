"""The recorded computation as flat typed arrays.

Recording appends a handful of ints per node to three ``array.array('q')`` columns (no
per-node object for the garbage collector to scan), which the compiled recorders write as C
int64s and a flush reads as numpy int arrays with one memcpy each (the lists they replace were
converted int by int: 0.91 ms per 100k ints against 0.012). numpy is used here only as an
integer-array library, never for values.
"""
from __future__ import annotations

import threading
from array import array
from functools import cached_property

import numpy as np
import scipy.sparse

#: An input reference is ``node << PART_BITS | part``: part 0 is a node's whole result, part
#: ``p + 1`` the p-th output of a multi-output node (split).
PART_BITS = 16
PART_MASK = (1 << PART_BITS) - 1


class SignatureTable:
    """Interns signature keys to dense ints and keeps what schedulers need per signature:
    how many input slots are node references (``nref``) and how many are per-node integer data
    (``naux``), whether the op is heavy (agenda tie-break), a label (explain), and an opaque
    ``payload`` for the executor."""

    def __init__(self):
        self.ids: dict = {}
        self.nref: list[int] = []
        self.naux: list[int] = []
        self.heavy: list[bool] = []
        self.label: list[str] = []
        self.payload: list = []
        self._arrays = None
        # scopes of several threads intern into one table: the ids and the lists must grow
        # together (two interns that both read len(nref) would share a signature id), and
        # arrays() must not read nref after one append and naux before the next
        self._lock = threading.Lock()

    def __len__(self):
        return len(self.nref)

    def intern(self, key, nref, naux, heavy, label, payload) -> int:
        sig = self.ids.get(key)
        if sig is None:
            with self._lock:
                sig = self.ids.get(key)
                if sig is None:
                    sig = len(self.nref)
                    self.nref.append(nref)
                    self.naux.append(naux)
                    self.heavy.append(heavy)
                    self.label.append(label)
                    self.payload.append(payload)
                    self.ids[key] = sig
                    self._arrays = None
        return sig

    def arrays(self):
        """(nref, width, heavy) as numpy arrays indexed by signature."""
        arrays = self._arrays
        if arrays is None or len(arrays[0]) != len(self.nref):
            with self._lock:
                nref = np.array(self.nref, dtype=np.int64)
                arrays = self._arrays = (nref, nref + np.array(self.naux, dtype=np.int64),
                                         np.array(self.heavy, dtype=bool))
        return arrays


class Graph:
    """Nodes in recording order (a topological order). ``sig[i]``: signature id; ``depth[i]``:
    0 for nodes without node inputs, else 1 + the deepest input (computed while recording);
    ``ins``: for each node, its ``nref`` input references then its ``naux`` integers.

    The columns are ``array('q')``, never exported: a view reads a slice of them (a copy), as
    a live buffer export would make the next append raise BufferError."""

    __slots__ = ("table", "sig", "depth", "ins")

    def __init__(self, table: SignatureTable):
        self.table = table
        self.sig = array("q")
        self.depth = array("q")
        self.ins = array("q")

    def __len__(self):
        return len(self.sig)

    def view(self, start: int = 0, ins_start: int = 0) -> "GraphView":
        """The nodes ``start..`` (those not yet executed) as numpy arrays; inputs produced before
        ``start`` count as available."""
        sig = np.frombuffer(self.sig[start:], np.int64)
        ins = np.frombuffer(self.ins[ins_start:], np.int64)
        nref_of, width_of, _ = self.table.arrays()
        width = width_of[sig]
        offsets = width.cumsum()
        if len(sig) and offsets[-1] != len(ins):
            raise ValueError(f"the graph's last {len(sig)} nodes take {offsets[-1]} input slots, it holds {len(ins)}: "
                             "a node was half appended (a call failed writing an integer that no int64 holds)")
        offsets -= width
        nref = nref_of[sig]
        nrefs = int(nref.sum())
        if nrefs == len(ins):   # no integer data: every slot is a reference
            refs = ins - (start << PART_BITS)
        else:   # (numpy's methods, not its functions: on a small flush their wrappers cost as much)
            aux_before = offsets - nref.cumsum()
            aux_before += nref
            refs = ins[aux_before.repeat(nref) + np.arange(nrefs)]
            refs -= start << PART_BITS
        np.maximum(refs, -1, out=refs)
        return GraphView(self, start, sig, nref, refs, offsets, ins)


class GraphView:
    """A segment of a graph for schedulers: local node ids ``0..n-1`` (global id = local +
    ``start``), dense local types ``0..T-1`` (``type_sigs`` maps them back to signatures),
    dependencies inside the segment in CSR form (``indptr``/``indices``, duplicates kept);
    ``refs``: every input reference in slot order, relative to the segment (-1: made before it);
    node i's input slots are ``ins[offsets[i]:]`` (``ins`` holds the segment's slots only).

    What only scheduling reads (depths, dependencies, types) is computed on first use: a scope
    whose structure the plan cache knows needs the signatures and references alone (its key)."""

    def __init__(self, graph: Graph, start, sig, nref, refs, offsets, ins):
        self.table, self.start, self.sig, self.refs, self.offsets, self.ins = graph.table, start, sig, refs, offsets, ins
        self._graph, self._nref = graph, nref

    def __len__(self):
        return len(self.sig)

    @cached_property
    def depth(self) -> np.ndarray:
        """Per node, 0 without inputs made in the segment, else 1 + its deepest such input: the
        depth of DyNet's agenda, which counts only the inputs that the batched computation has
        yet to run. The recorded depths count every input since the scope began: after a
        flush, a node reading earlier results lay as deep as they did, so the agenda ranked the
        types of one small flush by the lengths of the sentences they came from (and split
        them), and the depth scheduler split each type by them."""
        if not self.start:  # every input is in the segment: the recorded depths are these
            return np.frombuffer(self._graph.depth[:len(self.sig)], np.int64)
        return _depths(len(self.sig), *self.edges, *self.consumers)

    @cached_property
    def indices(self) -> np.ndarray:
        return self.edges[0]

    @cached_property
    def indptr(self) -> np.ndarray:
        n = len(self.sig)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.edges[1], minlength=n), out=indptr[1:])
        return indptr

    @cached_property
    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(producer, consumer) of every dependency inside the segment, in slot order (so by
        consumer, and each producer before its consumer)."""
        inside = self.refs >= 0
        return self.refs[inside] >> PART_BITS, np.arange(len(self.sig)).repeat(self._nref)[inside]

    @cached_property
    def consumers(self) -> tuple[np.ndarray, np.ndarray]:
        """(first, nodes): the nodes with an input made in the segment, ascending, and where
        their edges start in ``edges`` (for ``reduceat`` over each node's inputs)."""
        dst = self.edges[1]
        if not len(dst):
            return dst, dst
        starts = np.empty(len(dst), dtype=bool)
        starts[0] = True
        np.not_equal(dst[1:], dst[:-1], out=starts[1:])
        first = starts.nonzero()[0]
        return first, dst[first]

    @cached_property
    def type_sigs(self) -> np.ndarray:
        return self._sig_counts[1]

    @cached_property
    def type_counts(self) -> list[int]:
        """Nodes per local type."""
        counts, sigs = self._sig_counts
        return counts[sigs].tolist()

    @cached_property
    def _sig_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(nodes per signature, the signatures present): one count for both."""
        counts = np.bincount(self.sig, minlength=len(self.table))
        return counts, counts.nonzero()[0]

    @cached_property
    def types(self) -> np.ndarray:
        remap = np.empty(len(self.table), dtype=np.int64)
        remap[self.type_sigs] = np.arange(len(self.type_sigs))
        return remap[self.sig]

    @cached_property
    def heavy(self) -> np.ndarray:
        return self.table.arrays()[2][self.type_sigs]

    @property
    def ntypes(self) -> int:
        return len(self.type_sigs)

    @property
    def type_labels(self) -> list[str]:
        """Per local type, its signature's label: stable across processes (policies store them)."""
        return [self.table.label[s] for s in self.type_sigs.tolist()]

    def ancestors(self, seeds) -> np.ndarray:
        """Per node, whether it is one of ``seeds`` (local ids) or, at any depth, an input of
        one: what a backward from them reaches. One step per depth level, deepest first (a
        node's inputs are shallower than it), unless no node but the seeds ends a path."""
        reached = np.zeros(len(self.sig), dtype=bool)
        reached[self.indices] = True
        reached[seeds] = True
        if reached.all():   # every node but the seeds has a consumer: each leads to a seed
            return reached
        reached[:] = False
        reached[seeds] = True
        depth = self.depth
        order = np.argsort(-depth, kind="stable")
        for nodes in np.split(order, np.flatnonzero(np.diff(depth[order])) + 1):
            nodes = nodes[reached[nodes]]
            if len(nodes):
                reached[gather_ranges(self.indptr, self.indices, nodes)] = True
        return reached

    def successors(self):
        """CSR (sptr, succ) of consumers, duplicates kept, each node's in ascending order: for
        the agenda and learned schedulers. The transpose of the dependency CSR, by scipy's
        counting sort (3x faster than a stable argsort of the edges)."""
        n = len(self.sig)
        deps = scipy.sparse.csr_array((np.ones(len(self.indices), dtype=np.int8), self.indices, self.indptr),
                                      shape=(n, n))
        consumers = deps.tocsc()
        return consumers.indptr.astype(np.int64, copy=False), consumers.indices.astype(np.int64, copy=False)


def _depths(n, src, dst, first, readers) -> np.ndarray:
    """``GraphView.depth`` from the segment's edges (by consumer, a producer before its
    consumer): one level at once where no input made in the segment has one itself (a later
    flush is mostly shallow: a parser's step over every sentence; four numpy calls, not a
    Python pass over its edges); else one pass over them in Python, or for many edges one
    numpy step per level while the levels are few."""
    depth = np.zeros(n, dtype=np.int64)
    depth[readers] = 1
    if not depth[src].any():
        return depth
    if len(src) > 1024:
        for _ in range(8):
            deeper = np.maximum.reduceat(depth[src], first)
            deeper += 1
            if (deeper == depth[readers]).all():
                return depth
            depth[readers] = deeper
    depth = [0] * n
    for u, v in zip(src.tolist(), dst.tolist()):
        if depth[u] >= depth[v]:
            depth[v] = depth[u] + 1
    return np.array(depth, dtype=np.int64)


def gather_ranges(ptr, values, nodes):
    """Concatenation of ``values[ptr[v]:ptr[v+1]]`` for v in ``nodes``, without a Python loop."""
    starts, ends = ptr[nodes], ptr[nodes + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return values[:0]
    return values[np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)]
