"""Union–find whose edges carry how one node's order maps onto another's (ED-Batch Alg. 6).

An order is a direction bit (Q-nodes and two-child P-nodes: 0 = stored order, 1 = reversed)
or a permutation (P-nodes with three or more children: `t[i]` is the place, in the other node,
of the child that corresponds to child i; None is the identity).  Find composes the
transformations up to the class root, whose own order is its stored one.  Union by size and
path compression keep finds short; every change since the last checkpoint is logged, so a
batch operand whose equivalences do not all fit is taken back out as a whole.
"""


def _compose(a, b):
    """a then b, for transformations of the same kind."""
    if isinstance(a, int):
        return a ^ b
    if a is None:
        return b
    if b is None:
        return a
    return [b[i] for i in a]


def _inverse(a):
    if a is None or isinstance(a, int):
        return a
    inv = [0] * len(a)
    for i, j in enumerate(a):
        inv[j] = i
    return inv


def _same(a, b):
    if a is None or b is None:
        c = a if b is None else b
        return c is None or all(i == j for i, j in enumerate(c))
    return a == b


class OrderUnionFind:
    """Classes of tree nodes whose orders determine each other."""

    def __init__(self):
        self.up = {}        # node -> (parent, transformation node -> parent); roots absent
        self._size = {}     # class root -> number of nodes
        self._log = []      # (node, its old `up` entry or None, root it joined or None)

    def find(self, x, t):
        """(class root, transformation from x to it); t is the identity of x's kind."""
        up = self.up
        e = up.get(x)
        if e is None:
            return x, t
        if e[0] not in up:          # x hangs right under its root: the common case
            tn = e[1]
            return e[0], (tn ^ t if t.__class__ is int else _compose(tn, t))
        path = []
        while e is not None:
            path.append((x, e))
            x = e[0]
            e = up.get(x)
        root, log = x, self._log
        bit = t.__class__ is int
        for node, (parent, tn) in reversed(path):      # nearest the root first
            t = tn ^ t if bit else _compose(tn, t)
            if parent is not root:
                log.append((node, up[node], None))
                up[node] = (root, t)
        return root, t

    def union(self, x, y, t):
        """Record that x's order is y's order through t (x -> y); False if that contradicts."""
        bit = t.__class__ is int
        one = 0 if bit else None
        up = self.up
        # a root's find needs no call (the common case: the classes are shallow)
        rx, tx = (x, one) if x not in up else self.find(x, one)
        ry, ty = (y, one) if y not in up else self.find(y, one)
        if rx is ry:
            return tx == t ^ ty if bit else _same(tx, _compose(t, ty))
        size = self._size
        sx, sy = size.get(rx, 1), size.get(ry, 1)
        if sx > sy:         # hang ry under rx instead: ry -> rx is the inverse
            rx, ry, sx, sy = ry, rx, sy, sx
            tx, ty, t = ty, tx, t if bit else _inverse(t)
        # rx -> ry must turn x's way to rx (tx) into x's way to ry (t then ty)
        up[rx] = (ry, tx ^ t ^ ty if bit else _compose(_inverse(tx), _compose(t, ty)))
        size[ry] = sx + sy
        self._log.append((rx, None, ry))
        return True

    def checkpoint(self):
        """Keep everything so far; `rollback` returns here."""
        self._log.clear()

    def rollback(self):
        up, size, log = self.up, self._size, self._log
        while log:
            node, old, joined = log.pop()
            if joined is None:
                up[node] = old
            else:
                del up[node]
                size[joined] -= size.get(node, 1)
