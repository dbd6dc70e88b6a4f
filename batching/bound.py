"""Lower bounds on the number of batches of any schedule.

ED-Batch's (Appendix A.3): a batch holds one type and no two nodes of which one depends on the
other, so type t needs at least as many batches as the most t-nodes on any path, and no schedule
can use fewer batches than the sum of those over types.

That sum ignores order: when two types alternate along paths in different orders (TreeLSTM-2Type's
two weights), no schedule reaches it. ``path_bound`` counts order for a few types at a time: the
schedule's batches of the types in S, read in order, contain every path's sequence of S-nodes, so
they number at least the shortest common supersequence of any two of those sequences."""
from __future__ import annotations

import numpy as np

from .graph import GraphView, gather_ranges

_CELLS = 1 << 24  # nodes x types counted at once: bounds the memory of the count matrix
_SEQUENCES = 512  # distinct S-sequences at one node past which a set S is not tried
_PAIRS = 1 << 16  # pairs of sequences compared at once


def lower_bound(view: GraphView) -> int:
    return int(chain_counts(view).sum())


def chain_counts(view: GraphView) -> np.ndarray:
    """Per type, the most nodes of that type on one path."""
    n, ntypes = len(view), view.ntypes
    step = max(1, _CELLS // max(n, 1))
    return np.concatenate([_longest_chains(view, np.arange(lo, min(lo + step, ntypes)))
                           for lo in range(0, ntypes, step)] or [np.zeros(0, dtype=np.int64)])


def _longest_chains(view: GraphView, types: np.ndarray) -> np.ndarray:
    """Per type of ``types``, the most nodes of that type on one path, one depth level at a time."""
    column = np.full(view.ntypes, -1)
    column[types] = np.arange(len(types))
    mine = column[view.types]
    count = np.zeros((len(view), len(types)), dtype=np.int64)
    ndeps = np.diff(view.indptr)
    order = np.argsort(view.depth, kind="stable")
    for level in np.split(order, np.flatnonzero(np.diff(view.depth[order])) + 1):
        inner = level[ndeps[level] > 0]
        if len(inner):
            rows = count[gather_ranges(view.indptr, view.indices, inner)]
            starts = np.cumsum(ndeps[inner]) - ndeps[inner]
            count[inner] = np.maximum.reduceat(rows, starts, axis=0)
        own = level[mine[level] >= 0]
        count[own, mine[own]] += 1
    return count.max(axis=0, initial=0)


def path_bound(view: GraphView) -> int:
    """The A.3 bound, raised where types alternate: for each set S of a type and the types of
    its nodes' inputs (where those are two or more: the alternatives a schedule must order),
    the A.3 counts of S are replaced by the longest shortest common supersequence of two paths'
    S-sequences. Costs a Python pass over the graph per set; a set whose paths have more than
    ``_SEQUENCES`` distinct sequences at a node (lattices) is skipped."""
    counts = chain_counts(view)
    best = total = int(counts.sum())
    for S in _candidate_sets(view, counts):
        sequences = _sequences(view, S)
        if sequences is not None:
            best = max(best, total - int(counts[S].sum()) + _longest_supersequence(sequences))
    return best


def _candidate_sets(view: GraphView, counts: np.ndarray) -> list[list[int]]:
    """Per type c whose nodes take inputs of two or more types that recur on a path: c and
    those types."""
    consumers = np.repeat(np.arange(len(view)), np.diff(view.indptr))
    pairs = np.unique(view.types[consumers] * view.ntypes + view.types[view.indices])
    by_type: dict[int, list[int]] = {}
    for c, t in zip((pairs // view.ntypes).tolist(), (pairs % view.ntypes).tolist()):
        if c != t:
            by_type.setdefault(c, []).append(t)
    recurring = [(c, [t for t in inputs if counts[t] > 1]) for c, inputs in by_type.items()]
    return [sorted({c, *inputs}) for c, inputs in recurring if len(inputs) > 1]


def _sequences(view: GraphView, S: list[int]):
    """The distinct S-sequences of maximal paths, or None past ``_SEQUENCES``. A path that
    skips an S-node it could pass through reads a subsequence of one that does not, so each
    S-node extends only the sequences of its nearest S-ancestors that are no other's ancestor."""
    in_s = np.zeros(view.ntypes, dtype=bool)
    in_s[S] = True
    member = in_s[view.types].tolist()
    types, indptr, indices = view.types.tolist(), view.indptr.tolist(), view.indices.tolist()
    nearest: list = [()] * len(view)  # per node: its nearest S-ancestors (an S-node: itself)
    above: dict[int, int] = {}  # per S-node: a bitmask of its S-ancestors, by ``bit``
    bit: dict[int, int] = {}
    seqs: dict[int, frozenset] = {}
    inner: set[int] = set()  # S-nodes some S-node extends
    for v in np.argsort(view.depth, kind="stable").tolist():
        near = set()
        for p in indices[indptr[v]:indptr[v + 1]]:
            near.update(nearest[p])
        if not member[v]:
            nearest[v] = near
            continue
        mask = 0
        for p in near:
            mask |= above[p]
        keep = [p for p in near if not mask >> bit[p] & 1]
        t = types[v]
        if keep:
            union = set().union(*(seqs[p] for p in keep))
            if len(union) > _SEQUENCES:
                return None
            seqs[v] = frozenset(s + (t,) for s in union)
            inner.update(keep)
        else:
            seqs[v] = frozenset([(t,)])
        for p in near:
            mask |= 1 << bit[p]
        above[v], bit[v], nearest[v] = mask, len(bit), (v,)
    ends = set().union(*(s for v, s in seqs.items() if v not in inner))
    return ends if len(ends) <= 4 * _SEQUENCES else None


def _longest_supersequence(sequences) -> int:
    """The most, over pairs, of |p| + |q| - LCS(p, q), by the bit-parallel LCS (Allison and
    Dix): the pairs go through numpy together, one multi-word bit vector per pair."""
    seqs = sorted(sequences, key=len, reverse=True)
    letters = {t: i for i, t in enumerate(sorted({t for s in seqs for t in s}))}
    k, longest = len(seqs), len(seqs[0])
    words = (longest + 63) // 64
    lengths = np.array([len(s) for s in seqs])
    codes = np.full((k, longest), -1)
    match = np.zeros((k, len(letters) + 1, words), dtype=np.uint64)  # letter -1: never matches
    for row, s in enumerate(seqs):
        for i, t in enumerate(s):
            codes[row, i] = letters[t]
            match[row, letters[t], i // 64] |= np.uint64(1) << np.uint64(i % 64)
    full = np.zeros((k, words), dtype=np.uint64)
    for w in range(words):
        n = np.clip(lengths - 64 * w, 0, 64).astype(np.uint64)
        full[:, w] = np.where(n == 64, ~np.uint64(0), (np.uint64(1) << (n % np.uint64(64))) - np.uint64(1))
    best = longest
    first, second = np.triu_indices(k, 1)
    for lo in range(0, len(first), _PAIRS):
        p, q = first[lo:lo + _PAIRS], second[lo:lo + _PAIRS]
        mask = full[q]
        v = mask.copy()
        for i in range(longest):
            u = v & match[q, codes[p, i]]
            v = (_add(v, u) | _sub(v, u)) & mask
        common = lengths[q] - np.unpackbits(v.view(np.uint8), axis=1).sum(axis=1)
        best = max(best, int((lengths[p] + lengths[q] - common).max()))
    return best


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b of multi-word unsigned ints (word 0 lowest), carries passed up, the top one dropped."""
    out, carry = a + b, np.zeros(len(a), dtype=np.uint64)
    for w in range(a.shape[1]):
        low = out[:, w] < a[:, w]
        out[:, w] += carry
        carry = (low | (out[:, w] < carry)).astype(np.uint64)
    return out


def _sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b of multi-word unsigned ints, borrows passed up."""
    out, borrow = a - b, np.zeros(len(a), dtype=np.uint64)
    for w in range(a.shape[1]):
        low = a[:, w] < b[:, w]
        high = out[:, w] < borrow
        out[:, w] -= borrow
        borrow = (low | high).astype(np.uint64)
    return out
