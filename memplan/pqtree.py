"""PQ tree of Booth & Lueker (1976): every leaf order in which given subsets stay consecutive.

A node keeps its children in a doubly linked list whose sibling links carry no direction, so a
Q-node is read backwards or spliced into another list in O(1) and a template touches only the
pertinent children.  Every child knows its parent (unlike the original, which leaves interior
children of Q-nodes without one): Bubble is then a plain walk up, and when two Q-nodes merge the
one with fewer children is re-parented into the other, which keeps the total cost near linear.

Every mutation is journaled (a snapshot of a node the first time a reduce touches it), so a
reduce that fails half-way is rolled back and leaves the tree as it was; the same journal lets a
caller group several reduces into one transaction (`_begin`/`_commit`/`_rollback`).
"""

from math import factorial
from operator import attrgetter, index

from .gcpause import paused_gc

LEAF, PNODE, QNODE = 0, 1, 2
EMPTY, PARTIAL, FULL = 0, 1, 2
_parent = attrgetter("parent")


def _skip(entry):
    """The journal's append while it is off."""


class Node:
    """A leaf, P-node or Q-node.  `kind` to `size` are its structure (what the journal saves),
    `leaf` a leaf's number, `stamp` the pass that last changed it (`pstamp` the one before:
    a node keeps its leaves while its stamp stays); the rest is bookkeeping of the pass that
    last `mark`ed the node (a leaf's `rep` is always itself)."""

    __slots__ = ("kind", "parent", "s0", "s1", "end0", "end1", "nch", "size", "leaf",
                 "stamp", "pstamp", "mark", "npert", "ndone", "plc", "label", "full", "partial",
                 "rep", "h", "idx")

    def __init__(self, kind, leaf=-1, stamp=0):
        self.kind = kind
        self.parent = self.s0 = self.s1 = self.end0 = self.end1 = None
        self.nch = 0
        self.size = 1 if kind == LEAF else 0
        self.leaf = self.rep = leaf
        self.stamp = stamp
        self.pstamp = self.mark = 0
        self.label = EMPTY


def children(x):
    """x's children in stored order (end0 to end1)."""
    prev, cur = None, x.end0
    while cur is not None:
        yield cur
        prev, cur = cur, (cur.s1 if cur.s0 is prev else cur.s0)


class PQTree:
    """PQ tree over leaves 0..n-1, initially admitting all n! orders."""

    def __init__(self, n):
        n = index(n)
        if n < 0:
            raise ValueError(f"PQTree needs n >= 0 leaves, got {n}")
        self.n = n
        leaves = self._leaves = paused_gc(lambda: [Node(LEAF, i) for i in range(n)])
        self._tick = 0          # id of the current pass: marks scratch fields and journal stamps
        self._journal = []
        self._journaled = True  # off: a failed reduce may leave the tree broken (caller drops it)
        self._depth = 0         # open transactions
        self._changed = None
        self._exact = None
        self._split = None      # (node, children moved out of it) after a _split_off
        self._inner = []        # every inner node made, for `_release`
        if n == 0:
            self.root = None
        elif n == 1:
            self.root = leaves[0]
        else:
            root = self.root = Node(PNODE)
            self._inner.append(root)
            prev = None
            for x in leaves:
                x.parent = root
                x.s0 = prev
                if prev is not None:
                    prev.s1 = x
                prev = x
            root.end0, root.end1, root.nch, root.size = leaves[0], leaves[-1], n, n

    # ---------------------------------------------------------------- public API

    def reduce(self, subset):
        """Keep only the orders in which `subset` is consecutive; if there are none, return
        False and leave the tree as it was."""
        leaves, n = self._leaves, self.n
        units = []
        for v in map(index, subset):       # a float is no leaf number (TypeError)
            if not 0 <= v < n:
                raise ValueError(f"leaf {v!r} out of range for a PQTree over {n} leaves")
            units.append(leaves[v])
        return self._reduce(units) is not None

    def frontier(self):
        """One admissible order: the leaves left to right."""
        out = []
        if self.root is None:
            return out
        stack = [self.root]
        while stack:
            x = stack.pop()
            if x.kind == LEAF:
                out.append(x.leaf)
            else:
                ch = list(children(x))
                ch.reverse()
                stack.extend(ch)
        return out

    def count(self):
        """Number of leaf orders the tree admits."""
        total = 1
        stack = [self.root] if self.root is not None else []
        while stack:
            x = stack.pop()
            if x.kind == PNODE:
                total *= factorial(x.nch)
            elif x.kind == QNODE:
                total *= 2
            else:
                continue
            stack.extend(children(x))
        return total

    def _release(self):
        """Unlink the nodes (the tree is unusable after): a tree is one big reference cycle,
        which only a pass of the garbage collector over all of it would free otherwise."""
        for x in self._inner:
            x.parent = x.s0 = x.s1 = x.end0 = x.end1 = None
        for x in self._leaves:
            x.parent = x.s0 = x.s1 = None
        self._inner.clear()
        self.root = None
        self._journal.clear()

    # ---------------------------------------------------------------- transactions

    def _begin(self):
        self._depth += 1
        return len(self._journal)

    def _commit(self):
        self._depth -= 1
        if self._depth == 0:
            self._journal.clear()

    def _rollback(self, mark):
        self._restore(mark)
        self._depth -= 1

    def _restore(self, mark):
        journal = self._journal
        for i in range(len(journal) - 1, mark - 1, -1):
            e = journal[i]
            if e[0] is None:
                self.root = e[1]
            else:
                x, x.kind, x.parent, x.s0, x.s1, x.end0, x.end1, x.nch, x.size = e
        del journal[mark:]

    def _touch(self, x):
        if x.stamp != self._tick:
            x.pstamp = x.stamp
            x.stamp = self._tick
            if self._journaled:
                self._journal.append((x, x.kind, x.parent, x.s0, x.s1, x.end0, x.end1, x.nch,
                                      x.size))

    def _fresh(self):
        """A new pass id; nodes marked with an older one carry stale scratch fields."""
        self._tick += 1
        return self._tick

    # ---------------------------------------------------------------- Bubble and Reduce

    def _reduce(self, units, check=False):
        """Make the union of `units` consecutive: disjoint nodes (leaves, or whole subtrees that
        are known to lie inside the set, each with `rep` one of its leaves).  With `check`, a
        set that is likely not to fit is tried first without changing the tree.

        Returns the changed nodes as (a leaf of it, its size before), or None on failure (the
        tree restored).  A node is reported when a template rebuilt its children or merged it
        into its parent, so an operand's subtree changed iff a reported node lies inside it.
        `self._exact` is then the node whose leaves are exactly the set, if there is one.
        """
        self._split = None
        if len(units) > 2:
            p = units[0].parent
            if p is not None and p.kind == PNODE and units[-1].parent is p:
                changed = self._reduce_siblings(p, units)
                if changed is not None:
                    return changed
        # The units are done at once, each counted as a done child of its parent (`first`, the
        # parents, each once).
        rid = self._fresh()
        pert, first = [], []
        k = 0
        for x in units:
            if x.mark != rid:
                x.mark = rid
                x.label = FULL
                size = x.plc = x.size
                k += size
                pert.append(x)
                p = x.parent
                if p is None:               # the root: the whole set, nothing to do
                    continue
                if p.mark != rid:
                    p.mark = rid
                    p.npert = p.ndone = 1
                    p.plc = size
                    p.label = EMPTY
                    p.full = [x]
                    p.partial = []
                    p.rep = x.rep
                    first.append(p)
                else:
                    p.npert += 1
                    p.ndone += 1
                    p.plc += size
                    p.full.append(x)
        self._exact = pert[0] if len(pert) == 1 else None
        if len(pert) <= 1 or k == self.n:
            return []
        if len(first) == 1:                 # siblings: their parent is the pertinent root
            p = first[0]
            if len(pert) == p.nch:
                self._exact = p
                return []
            return self._reduce_at(p, pert, rid)

        # Bubble walks up from the parents breadth-first until one pending node is left, the
        # pertinent root or an ancestor of it; then every pertinent node knows how many
        # pertinent children it has.
        queue = first[:]
        i = 0
        while len(queue) - i > 1:
            x = queue[i]
            i += 1
            p = x.parent
            if p is None:                   # the tree root: wait for the others to arrive
                queue.append(x)
            elif p.mark != rid:
                p.mark = rid
                p.npert = 1
                p.ndone = p.plc = 0
                p.label = EMPTY
                p.full = []
                p.partial = []
                queue.append(p)
            else:
                p.npert += 1

        if check:           # a failing reduce then costs no surgery and no undo
            if not self._feasible(first, k):
                return None
            for x in queue:
                x.ndone = x.plc = 0
                x.label = EMPTY
                x.full = []
                x.partial = []
            for x in pert:
                p = x.parent
                p.ndone += 1
                p.plc += x.plc
                p.full.append(x)

        # Reduce: templates bottom-up; a node is ready when all its pertinent children are.
        mark = len(self._journal)
        self._changed = changed = []
        queue = [x for x in first if x.ndone == x.npert]
        j = 0
        while True:
            x = queue[j]
            j += 1
            if x.plc == k:
                self._exact = x
                ok = self._root_template(x)
                break
            if x.label != FULL:
                if len(x.full) == x.nch:    # all its children full (P1, Q1): nothing to do
                    x.label = FULL
                else:
                    x = self._partial_template(x)
                    if x is None:
                        ok = False
                        break
            p = x.parent
            if p.ndone == 0:
                p.rep = x.rep
            p.plc += x.plc
            (p.full if x.label == FULL else p.partial).append(x)
            p.ndone += 1
            if p.ndone == p.npert:
                queue.append(p)
        if not ok:
            self._restore(mark)
            return None
        if self._depth == 0:
            self._journal.clear()
        return changed

    def _feasible(self, first, k):
        """Whether every template of the reduce would apply: the labels and the tests of the
        templates, bottom-up, leaving the tree as it is."""
        queue = [x for x in first if x.ndone == x.npert]
        j = 0
        while True:
            x = queue[j]
            j += 1
            if x.plc == k:
                return self._root_fits(x)
            if x.label != FULL:
                if len(x.full) == x.nch:
                    x.label = FULL
                elif self._partial_fits(x):
                    x.label = PARTIAL
                else:
                    return False
            p = x.parent
            p.plc += x.plc
            (p.full if x.label == FULL else p.partial).append(x)
            p.ndone += 1
            if p.ndone == p.npert:
                queue.append(p)

    def _partial_fits(self, x):
        """_partial_template(x) would succeed."""
        if x.kind == PNODE:
            return len(x.partial) <= 1
        run = self._pertinent_run(x)
        if run is None:
            return False
        (ra, oa), (rb, ob) = run
        if oa is not None and ob is not None:
            return False
        if not x.partial:
            return True
        if len(x.partial) > 1:
            return False
        y = x.partial[0]
        if ra is rb:
            return True
        if y is ra:
            outer = oa
        elif y is rb:
            outer = ob
        else:
            return False
        return outer is not None or (oa is None and ob is None)

    def _root_fits(self, x):
        """_root_template(x) would succeed."""
        if len(x.full) == x.nch:
            return True
        if x.kind == PNODE:
            return len(x.partial) <= 2
        if len(x.partial) > 2:
            return False
        run = self._pertinent_run(x)
        if run is None:
            return False
        (ra, _), (rb, _) = run
        return all(y is ra or y is rb for y in x.partial)

    def _reduce_siblings(self, p, units):
        """Reduce when the units are distinct children of the P-node p, the common case of a
        carried set: checked without marking them one by one, and never a failure.  None if
        they are not such children."""
        full = set(units)
        if len(full) != len(units):
            return None
        p.full = units
        if self._fuller(p):             # the walk for the empty children checks them all
            empty = [c for c in children(p) if c not in full]
            if len(empty) + len(units) != p.nch:
                return None
        elif len(set(map(_parent, units))) != 1:
            return None
        else:
            empty = None
        self._fresh()
        if len(units) == p.nch:
            self._exact = p
            return []
        p.rep = units[0].rep
        self._changed = changed = []
        self._p2(p, empty)
        if self._depth == 0:
            self._journal.clear()
        return changed

    def _reduce_at(self, p, pert, rid):
        """Reduce when every unit is a child of p (the common case, and cheap: no Bubble)."""
        p.mark = rid
        p.label = EMPTY
        p.full = pert
        p.partial = []
        p.rep = pert[0].rep
        mark = len(self._journal)
        self._changed = changed = []
        self._exact = p
        if not self._root_template(p):
            self._restore(mark)
            return None
        if self._depth == 0:
            self._journal.clear()
        return changed

    def _partial_template(self, x):
        """Templates for a partial node below the pertinent root (P3, P5, Q2; the caller
        takes a full one, P1 and Q1)."""
        if x.kind == PNODE:
            npart = len(x.partial)
            if npart == 0:
                y = self._p3(x)
            elif npart == 1:
                y = self._p5(x)
            else:
                return None
        else:
            y = self._q2(x)
            if y is None:
                return None
        y.mark = self._tick
        y.label = PARTIAL
        y.plc = x.plc
        y.rep = x.rep
        return y

    def _root_template(self, x):
        """Templates for the pertinent root (P2, P4, P6, Q3); False if none applies."""
        if len(x.full) == x.nch:
            return True
        self._exact = None
        if x.kind == QNODE:
            return self._q3(x)
        npart = len(x.partial)
        if npart == 0:
            self._p2(x)
        elif npart == 1:
            self._p4(x)
        elif npart == 2:
            self._p6(x)
        else:
            return False
        return True

    # ---------------------------------------------------------------- templates

    def _p2(self, x, empty=None):
        self._changed.append((x.rep, x.size))
        if self._fuller(x):
            self._split_off(x, self._empty_children(x) if empty is None else empty)
        else:
            f = self._exact = self._group_full(x)
            self._append(x, f, 1)

    def _split_off(self, x, empty):
        """P2 by moving the given children of the P-node x out: a new node takes x's place,
        with them and x, which keeps the rest and is the node of the set."""
        g = self._new(PNODE)
        self._replace(x, g)
        last, size = self._move_children(x, empty, g)
        x.parent, x.s0, x.s1 = g, last, None
        last.s1 = x
        g.end1 = x
        g.nch = len(empty) + 1
        g.size = x.size
        x.size -= size
        self._exact = x
        self._split = (x, empty)

    def _cut(self, x, empty, rep):
        """Make the leaves of the P-node x but those of `empty` (some of its children, not
        all but one) consecutive, at the cost of moving those: a set that has lost a few
        members since it was made consecutive, named by the leaf `rep` of what remains."""
        self._fresh()
        self._changed = changed = [(rep, x.size)]
        self._split_off(x, empty)
        if self._depth == 0:
            self._journal.clear()
        return changed

    def _p3(self, x):
        self._changed.append((x.rep, x.size))
        q = self._new(QNODE)
        if self._fuller(x):
            e = self._group(x, self._empty_children(x))
            self._replace(x, q)
            x.size -= e.size
            x.label = FULL
            f = x
        else:
            f = self._group_full(x)
            self._replace(x, q)
            if x.nch == 1:
                e = x.end0
                self._unlink(e)
            else:
                e = x
                self._touch(x)
                x.size -= f.size
        self._append(q, e, 0)
        self._append(q, f, 1)
        q.size = e.size + f.size
        return q

    @staticmethod
    def _fuller(x):
        """Whether x has clearly more full children than empty ones: moving the empty ones
        out then costs less than grouping the full ones, and x becomes their group.  Sets
        that shrink one child at a time then cost their differences, not their sizes."""
        nfull = len(x.full)
        return x.nch - nfull + 2 < nfull

    @staticmethod
    def _empty_children(x):
        full = set(x.full)
        out = []
        prev, c = None, x.end0
        while c is not None:
            if c not in full:
                out.append(c)
            prev, c = c, (c.s1 if c.s0 is prev else c.s0)
        return out

    def _p4(self, x):
        self._changed.append((x.rep, x.size))
        y = x.partial[0]
        if x.full:
            f = self._group_full(x)
            self._append(y, f, self._full_side(y))
            y.size += f.size
        if x.nch == 1:
            size = x.size
            self._unlink(y)
            self._replace(x, y)
            y.size = size

    def _p5(self, x):
        self._changed.append((x.rep, x.size))
        y = x.partial[0]
        side = self._full_side(y)
        size, rest = x.size, x.size - y.size
        if x.full:
            f = self._group_full(x)
            self._append(y, f, side)
            rest -= f.size
        self._unlink(y)
        self._replace(x, y)
        if x.nch == 1:
            e = x.end0
            self._unlink(e)
            self._append(y, e, 1 - side)
        elif x.nch > 1:
            self._touch(x)
            x.size = rest
            self._append(y, x, 1 - side)
        y.size = size
        return y

    def _p6(self, x):
        y1, y2 = x.partial
        self._changed += ((x.rep, x.size), (y1.rep, y1.size), (y2.rep, y2.size))
        s1, s2 = self._full_side(y1), self._full_side(y2)
        f = self._group_full(x) if x.full else None
        self._unlink(y1)
        self._unlink(y2)
        if f is not None:
            self._append(y1, f, s1)
            y1.size += f.size
        z = self._concat(y1, s1, y2, s2)
        if x.nch == 0:
            self._replace(x, z)
        else:
            self._append(x, z, 1)

    def _q2(self, x):
        run = self._pertinent_run(x)
        if run is None:
            return None
        (ra, oa), (rb, ob) = run
        if oa is not None and ob is not None:   # the run must reach an end of x
            return None
        if not x.partial:
            return x
        if len(x.partial) > 1:
            return None
        y = x.partial[0]
        if ra is rb:                            # y alone, at an end: its full side faces out
            facing = None
        else:
            if y is ra:
                outer = oa
            elif y is rb:
                outer = ob
            else:
                return None
            if outer is None and (oa is not None or ob is not None):
                return None                     # y's empty side would face x's end
            facing = y.s1 if y.s0 is outer else y.s0
        self._changed.append((x.rep, x.size))
        return self._absorb(x, y, facing)

    def _q3(self, x):
        ys = x.partial
        if len(ys) > 2:
            return False
        run = self._pertinent_run(x)
        if run is None:
            return False
        (ra, oa), (rb, ob) = run
        outers = []
        for y in ys:
            if y is ra:
                outers.append(oa)
            elif y is rb:
                outers.append(ob)
            else:
                return False
        if ys:
            self._changed.append((x.rep, x.size))
        for y, outer in zip(ys, outers):
            x = self._absorb(x, y, y.s1 if y.s0 is outer else y.s0)
        return True

    def _pertinent_run(self, x):
        """Both ends of the run of x's pertinent children with the sibling beyond each end
        (None at an end of x); None if the pertinent children are not consecutive."""
        rid = self._tick
        start = x.partial[0] if x.partial else x.full[0]
        count = 1
        ends = []
        for cur in (start.s0, start.s1):
            prev = start
            while cur is not None and cur.mark == rid:
                count += 1
                prev, cur = cur, (cur.s1 if cur.s0 is prev else cur.s0)
            ends.append((prev, cur))
        if count != len(x.full) + len(x.partial):
            return None
        return ends

    # ---------------------------------------------------------------- list surgery

    def _new(self, kind):
        x = Node(kind, -1, self._tick)
        x.mark = self._tick
        self._inner.append(x)
        return x

    def _full_side(self, y):
        """Which end (0 or 1) of the partial Q-node y holds its full children."""
        c = y.end0
        return 0 if c.mark == self._tick and c.label == FULL else 1

    def _group_full(self, x):
        """Detach x's full children as one node (themselves if only one)."""
        f = self._group(x, x.full)
        f.label = FULL
        return f

    def _group(self, x, chosen):
        """Detach the given children of x as one new P-node (the child itself if only one)."""
        if len(chosen) == 1:
            f = chosen[0]
            self._unlink(f)
            return f
        f = self._new(PNODE)
        self._touch(x)
        prev, size = self._move_children(x, chosen, f)
        f.end0, f.end1, f.nch, f.size = chosen[0], prev, len(chosen), size
        return f

    def _move_children(self, x, children, g):
        """Unlink ``children`` (in order) from x and append them to the new node g: returns the
        last one moved and their total size. Sibling updates and `_touch` inlined: the hot
        loop of cuts and groupings."""
        tick = self._tick
        log = self._journal.append if self._journaled else _skip
        last, size = None, 0
        for c in children:
            a, b = c.s0, c.s1
            if a is not None:
                if a.stamp != tick:
                    a.pstamp, a.stamp = a.stamp, tick
                    log((a, a.kind, a.parent, a.s0, a.s1, a.end0, a.end1, a.nch, a.size))
                if a.s0 is c:
                    a.s0 = b
                else:
                    a.s1 = b
            if b is not None:
                if b.stamp != tick:
                    b.pstamp, b.stamp = b.stamp, tick
                    log((b, b.kind, b.parent, b.s0, b.s1, b.end0, b.end1, b.nch, b.size))
                if b.s0 is c:
                    b.s0 = a
                else:
                    b.s1 = a
            if a is None or b is None:
                nb = b if a is None else a
                if x.end0 is c:
                    x.end0 = nb
                if x.end1 is c:
                    x.end1 = nb
            if c.stamp != tick:
                c.pstamp, c.stamp = c.stamp, tick
                log((c, c.kind, c.parent, a, b, c.end0, c.end1, c.nch, c.size))
            c.parent = g
            c.s0 = last
            c.s1 = None
            if last is None:
                g.end0 = c
            else:
                last.s1 = c
            last = c
            size += c.size
        x.nch -= len(children)
        return last, size

    def _swap_sib(self, x, old, new):
        if x.stamp != self._tick:
            self._touch(x)
        if x.s0 is old:
            x.s0 = new
        else:
            x.s1 = new

    def _unlink(self, x):
        p, a, b = x.parent, x.s0, x.s1
        self._touch(p)
        self._touch(x)
        if a is not None:
            self._swap_sib(a, x, b)
        if b is not None:
            self._swap_sib(b, x, a)
        if a is None or b is None:
            nb = b if a is None else a
            if p.end0 is x:
                p.end0 = nb
            if p.end1 is x:
                p.end1 = nb
        p.nch -= 1
        x.parent = x.s0 = x.s1 = None

    def _replace(self, x, y):
        """Put the detached node y where x is."""
        p, a, b = x.parent, x.s0, x.s1
        self._touch(x)
        self._touch(y)
        y.parent, y.s0, y.s1 = p, a, b
        if a is not None:
            self._swap_sib(a, x, y)
        if b is not None:
            self._swap_sib(b, x, y)
        if p is None:
            if self._journaled:
                self._journal.append((None, self.root))
            self.root = y
        else:
            self._touch(p)
            if p.end0 is x:
                p.end0 = y
            if p.end1 is x:
                p.end1 = y
        x.parent = x.s0 = x.s1 = None

    def _append(self, p, x, side):
        """Add the detached node x at end `side` of p."""
        self._touch(p)
        self._touch(x)
        e = p.end1 if side else p.end0
        x.parent = p
        x.s1 = None
        x.s0 = e
        if e is None:
            p.end0 = p.end1 = x
        else:
            self._swap_sib(e, None, x)
            if side:
                p.end1 = x
            else:
                p.end0 = x
        p.nch += 1

    def _reparent(self, start, prev, stop, parent):
        """Give the run start..stop (entered from prev) the parent `parent`."""
        cur = start
        while True:
            self._touch(cur)
            cur.parent = parent
            if cur is stop:
                return
            prev, cur = cur, (cur.s1 if cur.s0 is prev else cur.s0)

    def _absorb(self, x, y, facing):
        """Splice the partial Q-node y into its parent Q-node x, its full end next to `facing`
        (a sibling of y, or None for the end of x).  Returns whichever of x, y survives."""
        self._changed.append((y.rep, y.size))
        if self._full_side(y) == 0:
            fe, ee = y.end0, y.end1
        else:
            fe, ee = y.end1, y.end0
        a = y.s0
        other = y.s1 if facing is a else a
        self._touch(x)
        for end, nb in ((fe, facing), (ee, other)):
            self._swap_sib(end, None, nb)
            if nb is None:
                if x.end0 is y:
                    x.end0 = end
                else:
                    x.end1 = end
            else:
                self._swap_sib(nb, y, end)
        if y.nch <= x.nch:
            self._reparent(fe, facing, ee, x)
            x.nch += y.nch - 1
            self._touch(y)
            y.parent = None             # y is gone: nothing may take it for a live node
            return x
        for c in (x.end0, x.end1):      # x's own children sit before and after y's
            prev = None
            while c is not None and c.parent is x:
                self._touch(c)
                c.parent = y
                prev, c = c, (c.s1 if c.s0 is prev else c.s0)
        self._touch(y)
        y.end0, y.end1, y.size = x.end0, x.end1, x.size
        y.nch += x.nch - 1
        self._replace(x, y)
        return y

    def _concat(self, a, sa, b, sb):
        """Join detached Q-nodes a and b, end sa of a next to end sb of b; the survivor."""
        ea, fa = (a.end1, a.end0) if sa else (a.end0, a.end1)
        eb, fb = (b.end1, b.end0) if sb else (b.end0, b.end1)
        self._swap_sib(ea, None, eb)
        self._swap_sib(eb, None, ea)
        if a.nch >= b.nch:
            keep = a
            self._reparent(fb, None, eb, a)
        else:
            keep = b
            self._reparent(fa, None, ea, b)
        self._touch(keep)
        keep.end0, keep.end1 = fa, fb
        keep.nch = a.nch + b.nch
        keep.size = a.size + b.size
        return keep

    # ---------------------------------------------------------------- helpers for memplan

    @staticmethod
    def _number_children(x):
        """Number x's children by their place in its stored order (`idx`)."""
        for i, c in enumerate(children(x)):
            c.idx = i
