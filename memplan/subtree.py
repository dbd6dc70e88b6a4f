"""The part of a PQ tree that orders one operand (ED-Batch's FindRoot + getSubtreeCons).

An operand whose variables are consecutive owns either a whole node or a run of children of a
Q-node.  Written over operand positions (0..m-1) instead of variables, the subtrees of a batch's
operands are comparable: equal ones admit the same position orders.  A node is named by the sum
of random 64-bit keys of its positions, so equal names mean equal position sets (collisions are
negligible, and could only cost an alignment, never report a wrong one).
"""

import random
import threading

from .pqtree import LEAF, PNODE

PERM, DIR = 1, 2        # order kinds: any permutation (P-node, >= 3 children) or a direction

_rng = random.Random(0x5EED)
_keys = []              # key of position i, shared by every plan (grown under the lock)
position = {}           # key -> position
_growing = threading.Lock()


def keys(m):
    """Keys of positions 0..m-1."""
    if len(_keys) < m:
        with _growing:
            while len(_keys) < m:
                k = _rng.getrandbits(64)
                if k not in position:
                    position[k] = len(_keys)
                    _keys.append(k)
    return _keys


class Subtree:
    """An operand's subtree: `nodes` are (name, tree node, kind, child names in stored order,
    number of positions), children before parents, the root last.  For a run the root's tree
    node is its Q-node, whose other children lie outside the operand, its child names follow
    the run from `ends[0]` to `ends[1]` (the end children, tree nodes); `ends` is None else."""

    __slots__ = ("nodes", "ends", "_signature", "_satisfied")

    def __init__(self, nodes, ends=None):
        self.nodes = nodes
        self.ends = ends
        self._signature = self._satisfied = None

    def signature(self):
        """Equal for two subtrees iff they admit the same position orders."""
        if self._signature is None:
            sig = set()
            for name, _, kind, seq, _ in self.nodes:
                if kind == PERM:
                    sig.add((name, kind))
                else:
                    sig.add((name, kind, tuple(seq) if seq[0] < seq[-1] else tuple(reversed(seq))))
            self._signature = frozenset(sig)
        return self._signature

    def satisfied(self):
        """Names of the position sets this subtree already keeps consecutive."""
        if self._satisfied is None:
            sat = set()
            for name, _, kind, seq, _ in self.nodes:
                sat.add(name)
                if kind == DIR:
                    sat.update(seq[i] + seq[i + 1] for i in range(len(seq) - 1))
            self._satisfied = sat
        return self._satisfied

    def constraints(self):
        """The consecutive sets that pin this subtree down, children first, as (name, parts)
        with the set the union of the parts: every node but the root, and every two
        neighbours under a Q-node."""
        last = len(self.nodes) - 1
        for i, (name, _, kind, seq, _) in enumerate(self.nodes):
            if i != last:
                yield name, seq
            if kind == DIR and len(seq) > 2:
                for j in range(len(seq) - 1):
                    yield seq[j] + seq[j + 1], seq[j:j + 2]

    def nodes_by_name(self):
        """name -> tree node, for the nodes whose leaves are exactly the named positions."""
        nodes = self.nodes[:-1] if self.ends else self.nodes
        return {name: node for name, node, _, _, _ in nodes}


def restrict(tree, operand):
    """The Subtree of `operand` (distinct variables, at least two) or None if not consecutive."""
    m = len(operand)
    key = keys(m)
    rid = tree._fresh()
    queue = list(map(tree._leaves.__getitem__, operand))
    for x, k in zip(queue, key):               # (a leaf's `plc` is not set: it is whole)
        x.mark = rid
        x.h = k
    nodes = []
    for x in queue:                             # grows as parents fill up
        size = x.size
        if size == m:                           # x holds exactly the operand
            return Subtree(nodes)
        p = x.parent
        if p is None:
            return None
        if p.mark != rid:
            p.mark = rid
            plc = p.plc = size
            p.h = x.h
        else:
            plc = p.plc = p.plc + size
            p.h += x.h
        if plc == p.size:                       # p lies wholly inside the operand
            seq = []
            prev, c = None, p.end0
            while c is not None:
                seq.append(c.h)
                prev, c = c, (c.s1 if c.s0 is prev else c.s0)
            kind = PERM if p.kind == PNODE and p.nch > 2 else DIR
            nodes.append((p.h, p, kind, seq, plc))
            queue.append(p)
        elif plc == m:                          # the operand is a run of p's children
            return _run(p, x, rid, m, nodes)
    return None


def _run(p, x, rid, m, nodes):
    """Finish the subtree of an operand that is a run of p's children, x one of them."""
    if p.kind == PNODE:
        return None
    sides = []
    size = x.size
    for cur in (x.s0, x.s1):
        side = []
        prev = x
        while cur is not None and cur.mark == rid and (cur.kind == LEAF or cur.plc == cur.size):
            side.append(cur)
            size += cur.size
            prev, cur = cur, (cur.s1 if cur.s0 is prev else cur.s0)
        sides.append(side)
    if size != m:
        return None
    run = sides[0][::-1]
    run.append(x)
    run.extend(sides[1])
    nodes.append((p.h, p, DIR, [c.h for c in run], m))
    return Subtree(nodes, (run[0], run[-1]))
