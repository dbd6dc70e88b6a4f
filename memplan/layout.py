"""Memory order for batched variables: ED-Batch's PQ-tree memory planning (§3, Alg. 2–7).

A batch runs its nodes in one order (`perm`); an operand is *aligned* when its variables, taken
in that order, occupy consecutive ascending slots, so the executor can pass a view instead of a
gather.  The passes follow the paper: each operand's variable set must be consecutive (PQ tree,
adjacency); BroadcastConstraint makes the subtrees of a batch's operands isomorphic;
DecideNodesOrder joins corresponding P-node permutations and Q-node directions in a
union–find; GetLeafOrder reads the order off the tree.

Where constraints conflict the heavier batch wins: batches are taken by weight (variables ×
`weights[b]`), and each batch is one transaction — its adjacency reduces, its broadcast and the
re-broadcast of every earlier batch it disturbs either all succeed or are rolled back, after
which the batch keeps what it can (dropping the operand whose adjacency failed, else adding its
operands one by one), so a lighter batch never costs an earlier one an operand.  Without any
conflict the result does not depend on the order, and a cheaper order is tried first, once all
operands' own adjacencies are known to fit together.

A batch is broadcast whole once, when it joins; after that a reduce that changes one of its
operands queues only what that operand gained (the reduced set's positions in it, and where the
set reached outside it, the rest of the operand) to be carried to its other operands.  So the
cascade through the heavier batches a lighter one disturbs costs about the size of the new
constraint per batch, not the size of every operand it passes; and where the new set is a
known one less a few members (a shorter prefix of sequences, down a chain of LSTM steps), about
the number of those members (see `_notify`).
Each transaction in weight order may carry at most `EFFORT` queued constraints per operand
position of its batch (and `EFFORT_MIN` more); past that it is rolled back and the batch is
left unaligned.
On chains a light batch late in a sequence sends its shorter sets back through every heavier
step before it, which made planning grow with the square of a chain's length; those batches are
worth little (the BiLSTM problems lose under 0.1% of the bytes aligned), and with the cap each
attempt's queue work is bounded by its batch's size.
`aligned` is always measured on the final order, never assumed.
"""

from collections import deque
from functools import partial
from math import inf
from operator import attrgetter, index, is_not
from typing import NamedTuple

from .gcpause import paused_gc
from .pqtree import LEAF, PNODE, PQTree
from .subtree import DIR, _keys, keys, position, restrict
from .unionfind import OrderUnionFind


EFFORT, EFFORT_MIN = 3, 128    # carried constraints per operand position, per batch
_known = partial(is_not, None)       # a position found, in a map over an operand's index
_leaf = attrgetter("leaf")


class Layout(NamedTuple):
    order: list     # memory order: order[slot] = variable
    perm: list      # perm[b]: the order in which to run batch b's nodes (positions)
    aligned: list   # aligned[b][j]: operand j of batch b sits in consecutive slots in perm order


def layout(n, batches, weights=None):
    """Plan where variables 0..n-1 live so that as many batch operands as possible are aligned.

    `batches[b]` is a tuple of equal-length operand lists (result first, then sources; position
    k of each belongs to the batch's k-th node); `weights[b]` (default 1) scales the batch's
    worth, e.g. bytes per variable.
    """
    return paused_gc(_layout, n, batches, weights)


def _layout(n, batches, weights):
    n = index(n)
    if n < 0:
        raise ValueError(f"layout needs n >= 0 variables, got {n}")
    ops = [_operands(b, batch, n) for b, batch in enumerate(batches)]
    if weights is None:
        weights = [1] * len(ops)
    else:
        weights = [float(w) for w in weights]
        if len(weights) != len(ops):
            raise ValueError(f"{len(weights)} weights for {len(ops)} batches")
        if not all(0 <= w < float("inf") for w in weights):
            raise ValueError("weights must be finite and >= 0")
    worth = [len(o) * (len(o[0]) if o else 0) * w for o, w in zip(ops, weights)]
    by_worth = sorted(range(len(ops)), key=lambda b: (-worth[b], -b))
    planner = _Planner(n, ops)
    # Consumers before producers, structure flows once from a batch's sources to the batches
    # that made them; in weight order it would flow back through every heavier batch again.
    # Without a conflict the fixpoint does not depend on the order, so that order is tried
    # first (on an unjournaled tree) where the adjacencies fit, and the weight order decides
    # only when some constraint has to be dropped.
    if not (planner.adjacent(by_worth)
            and planner.broadcast(reversed(range(len(ops))), give_up=True)):
        planner.broadcast(by_worth)
    order = planner.leaf_order(by_worth)
    pos = [0] * n
    for slot, v in enumerate(order):
        pos[v] = slot
    planner.tree._release()
    perm, aligned = [], []
    for b, batch in enumerate(ops):
        p, a = _choose_perm(pos, batch, planner.on[b])
        perm.append(p)
        aligned.append(a)
    return Layout(order, perm, aligned)


def _operands(b, batch, n):
    out = [list(map(index, o)) for o in batch]
    if out:
        m = len(out[0])
        for j, o in enumerate(out):
            if len(o) != m:
                raise ValueError(
                    f"batch {b}: operand {j} has {len(o)} variables, operand 0 has {m}")
            if o and not (0 <= min(o) and max(o) < n):
                raise ValueError(f"batch {b}: operand {j} has a variable outside 0..{n - 1}")
    return out


class _Planner:
    """The PQ tree under construction and, per batch, which operands it keeps aligned."""

    def __init__(self, n, ops):
        self.n = n
        self.ops = ops
        self.m = [len(o[0]) if o else 0 for o in ops]
        keys(max(self.m, default=0))       # position keys, for naming carried sets
        occ = self.occ = [[] for _ in range(n)]     # variable -> (batch, operand, position)
        self.index = {}         # (batch, operand) -> its variables' positions, once needed
        self.cand = []          # per batch: operands that can be aligned and constrain anything
        self.disjoint = []      # per batch: are those pairwise disjoint
        for b, batch in enumerate(ops):
            # an operand repeating an earlier one adds no constraint and is aligned with it
            cand, firsts = [], set()
            for j, o in enumerate(batch):
                t = tuple(o)
                if len(o) >= 2 and t not in firsts and len(set(o)) == len(o):
                    firsts.add(t)
                    cand.append(j)
            seen = set()
            for j in cand:
                seen.update(batch[j])
                for i, v in enumerate(batch[j]):
                    occ[v].append((b, j, i))
            self.cand.append(cand)
            self.disjoint.append(len(seen) == len(cand) * self.m[b])
        self.reset()

    def reset(self):
        self.tree = PQTree(self.n)
        self.on = [None] * len(self.ops)    # per accepted batch: is operand j in its group
        self.nact = [0] * len(self.ops)
        self.sub = [[None] * len(o) for o in self.ops]  # operand subtrees while still current
        # Named sets (a name: a set of positions of a batch, see `_notify`): the positions
        # of each, a list or (a bigger named set, positions it lacks); the tree node that
        # holds a set in an operand, and a node's name in an operand, both as long as the
        # node's stamp says it kept its leaves.
        self.positions = {}     # (batch, name) -> positions
        self.node_of = {}       # (batch, operand, name) -> (node, stamp)
        self.name_of = {}       # (batch, operand, node) -> (name, stamp)
        self.noted = []         # what this transaction added to those two
        self._fresh_queue()

    def _fresh_queue(self):
        self.queue = deque()    # (batch, positions or None, their name, operand that has
                                # them already) to carry; name None: the whole batch
        self.full = set()       # batches with a whole broadcast pending
        self.done = set()       # (batch, key) carried or queued in this transaction

    # ------------------------------------------------------------ BroadcastConstraint

    def adjacent(self, by_worth):
        """Whether every operand's own adjacency fits with all the others (on an unjournaled
        tree from then on); if not, the tree is left as it was.  A conflict usually shows
        here already, at a fraction of the cost of broadcasting: among the heaviest batches
        or among the lightest, so both ends are taken in turn, the cheaper one next."""
        tree = self.tree
        leaf = tree._leaves.__getitem__
        ops, cand = self.ops, self.cand
        mark = tree._begin()
        size = [len(cand[b]) * self.m[b] for b in by_worth]
        lo, hi = 0, len(by_worth) - 1
        spent = [0, 0]
        while lo <= hi:
            if spent[0] + size[lo] < spent[1] + size[hi]:
                b = by_worth[lo]
                spent[0] += size[lo]
                lo += 1
            else:
                b = by_worth[hi]
                spent[1] += size[hi]
                hi -= 1
            for j in cand[b]:
                if tree._reduce(list(map(leaf, ops[b][j]))) is None:
                    tree._rollback(mark)
                    return False
        tree._commit()
        tree._journaled = False
        return True

    def broadcast(self, batches, give_up=False):
        """Take the batches in turn; when one conflicts with those before it, keep what fits
        (or, with give_up, once `adjacent` holds, stop and return False on a new tree)."""
        for b in batches:
            group = self.cand[b]
            if not group:
                continue
            self.budget = inf if give_up else EFFORT * self.m[b] * len(group) + EFFORT_MIN
            self.over = False
            while not self._attempt(b, group, () if give_up else group, drop=not give_up):
                if give_up:
                    self.tree._release()
                    self.reset()
                    return False
                if self.over:
                    break       # too dear: the batch stays unaligned
                group = [j for j in group if j not in self.dropped]
                bad = self.culprit
                if bad is None or len(group) == 1:
                    kept = []
                    for j in group:
                        if bad is None and len(kept) == len(group) - 1:
                            break       # the whole group again, which just failed
                        if j != bad and self._attempt(b, kept + [j], [j]):
                            kept.append(j)
                    break
                group = [j for j in group if j != bad]
        return True

    def _push(self, c):
        if c not in self.full:
            self.full.add(c)
            self.queue.append((c, None, None, -1))

    def _drain(self):
        """Carry queued constraints to the fixpoint."""
        queue, full = self.queue, self.full
        left = self.budget
        while queue:
            left -= 1
            if left < 0:
                self.over = True
                return False
            c, pos, key, src = queue.popleft()
            if key is None:
                full.discard(c)
                ok = self._broadcast(c)
            else:
                ok = self._carry(c, pos, key, src)
            if not ok:
                return False
        return True

    def _attempt(self, b, group, new, drop=False):
        """One transaction: batch b with operand group `group` (of which the operands `new` are
        not in the tree yet), and everything it disturbs.  On failure `culprit` is the operand
        to blame, if one is (its adjacency failed, or its node orders cannot join).

        With `drop` (`new` is the whole group), an operand whose own adjacency fails leaves the
        group on the spot (listed in `dropped`) while another is left: a new attempt without
        it would redo the same reduces before it, so this saves the rollback and the redo."""
        tree = self.tree
        before, nbefore = self.on[b], self.nact[b]
        on = [False] * len(self.ops[b])
        for j in group:
            on[j] = True
        self.on[b], self.nact[b] = on, len(group)
        mark = tree._begin()
        self.made = []              # subtrees taken in this transaction
        self.noted = []
        self._fresh_queue()
        self._push(b)
        self.culprit = None
        ok = True
        leaves = tree._leaves
        whole = sum(_keys[:self.m[b]])
        self.dropped = []
        for j in new:
            changed = tree._reduce(list(map(leaves.__getitem__, self.ops[b][j])), check=True)
            if changed is None:
                if drop and self.nact[b] > 1:
                    on[j] = False
                    self.nact[b] -= 1
                    self.dropped.append(j)
                    continue
                self.culprit = j
                ok = False
                break
            if tree._exact is not None:
                if (b, whole) not in self.positions:
                    self.positions[(b, whole)] = list(range(self.m[b]))
                self._note(b, j, whole, tree._exact)
            if changed:
                self._notify(changed, self.ops[b][j])
        ok = ok and self._drain()
        if ok:
            self.culprit = self._conflicted(b)
            ok = self.culprit is None
        if ok:
            tree._commit()
            return True
        tree._rollback(mark)
        self.on[b], self.nact[b] = before, nbefore
        self._forget()
        return False

    def _note(self, c, j, h, node):
        """`node` holds the set named h in operand j of batch c."""
        st = node.stamp
        named, name = (c, j, h), (c, j, node)
        self.node_of[named] = (node, st)
        self.name_of[name] = (h, st)
        self.noted.append((named, name))

    def _forget(self):
        for c, j in self.made:
            self.sub[c][j] = None
        for a, b in self.noted:
            self.node_of.pop(a, None)
            self.name_of.pop(b, None)

    def _subtrees(self, c, js):
        """The subtrees of c's operands js (None if one is not consecutive)."""
        sub, made = self.sub[c], self.made
        out = []
        for j in js:
            s = sub[j]
            if s is None:
                s = sub[j] = restrict(self.tree, self.ops[c][j])
                if s is None:
                    return None
                made.append((c, j))
            out.append(s)
        return out

    def _notify(self, changed, reduced, skip=-1, skipop=None, units=False):
        """After a reduce of the set `reduced` (variables, or with `units` the nodes it was
        given, or None after a `_cut`) changed the tree: forget the subtrees that hold a
        changed node, and queue, for each such operand of an accepted batch (but those of
        batch `skip`, and the operand `skipop` that was given the set), what its subtree
        gained, to be carried to the batch's other operands: the positions of the set within
        the operand, and where the set reaches outside it, the other positions (the part
        inside must then be an end of the operand).

        A set is named by the sum of its positions' keys.  Where a cut took a few leaves out
        of a node whose set the operand has a name for, the set is queued by that name and
        the positions it lacks, without a look at its other members; that is how a set
        that shrinks step by step travels down a chain of batches at the cost of the steps.
        """
        occ, on, m, nact, sub = self.occ, self.on, self.m, self.nact, self.sub
        hit = None
        for rep, size in changed:
            for c, j, _ in occ[rep]:
                if nact[c] > 1 and on[c][j] and size <= m[c]:
                    sub[c][j] = None
                    if c != skip:
                        if hit is None:
                            hit = {}
                        hit[(c, j)] = []
        if hit is None:
            return
        if skipop is not None:
            hit.pop(skipop, None)
            if not hit:
                return
        key, full, done, queue = _keys, self.full, self.done, self.queue
        at = key.__getitem__
        tree = self.tree
        split = tree._split
        if split is not None and len(changed) == 1:
            x, lost = split
            leaves = list(map(_leaf, lost))
            if -1 not in leaves:        # all leaves (an inner node's `leaf` is -1)
                named, positions, name_of = [], self.positions, self.name_of
                for cj in hit:
                    c, j = cj
                    e = name_of.get((c, j, x))
                    if e is None or e[1] != x.pstamp:
                        continue
                    epos = list(map(self._index(c, j).get, leaves))
                    if None in epos:
                        continue
                    named.append(cj)
                    h = e[0] - sum(map(at, epos))
                    tag = (c, h)
                    if tag not in positions:
                        positions[tag] = (e[0], epos)
                    self._note(c, j, h, x)
                    if c not in full and tag not in done:
                        done.add(tag)
                        queue.append((c, None, h, j))
                if len(named) == len(hit):
                    return
                for cj in named:
                    del hit[cj]
        if reduced is None:
            reduced = _variables([split[0]])
        elif units:
            reduced = _variables(reduced)
        if len(hit) <= 2:       # usually: look the set up in each operand's own index
            for (c, j), pos in hit.items():
                pos.extend(filter(_known, map(self._index(c, j).get, reduced)))
        else:
            for v in reduced:
                for c, j, i in occ[v]:
                    pos = hit.get((c, j))
                    if pos is not None:
                        pos.append(i)
        exact = tree._exact
        for (c, j), pos in hit.items():
            mc, k = m[c], len(pos)
            if k == mc or c in full:
                continue
            h = sum(map(at, pos))
            parts = [(pos, h)] if k >= 2 else []
            if len(reduced) > k:
                if mc - k >= 2:
                    inside = set(pos)
                    parts.append(([p for p in range(mc) if p not in inside],
                                  sum(key[:mc]) - h))
            elif exact is not None and k >= 2:
                if not isinstance(self.positions.get((c, h)), list):
                    self.positions[(c, h)] = pos
                self._note(c, j, h, exact)
            for part, h in parts:
                tag = (c, h)
                if tag not in done:
                    done.add(tag)
                    queue.append((c, part, h, j))

    def _index(self, c, j):
        """Variable -> position in operand j of batch c."""
        d = self.index.get((c, j))
        if d is None:
            o = self.ops[c][j]
            d = self.index[(c, j)] = dict(zip(o, range(len(o))))
        return d

    def _carry(self, c, pos, h, src):
        """Make the positions `pos` (None: those named h) consecutive in every operand of c
        but `src`, whose reduce found them (both the part of a consecutive set inside a
        consecutive operand and the rest of the operand are consecutive already)."""
        tree = self.tree
        leaf, ops = tree._leaves.__getitem__, self.ops[c]
        for i, a in enumerate(self.on[c]):
            if a and i != src:
                if pos is None:
                    if self._cut_in(c, i, h):
                        continue
                    pos = self._resolve(c, h)
                vs = list(map(ops[i].__getitem__, pos))
                changed = tree._reduce(list(map(leaf, vs)))
                if changed is None:
                    return False
                if tree._exact is not None:
                    self.positions[(c, h)] = pos
                    self._note(c, i, h, tree._exact)
                if changed:
                    self._notify(changed, vs, skipop=(c, i))
        return True

    def _node(self, c, j, h):
        """The node that holds the set named h in operand j of batch c, if one is known."""
        e = self.node_of.get((c, j, h))
        if e is not None:
            x = e[0]
            if x.stamp == e[1] and (x.parent is not None or x is self.tree.root):
                return x
        return None

    def _cut_in(self, c, i, h):
        """Carry the set named h to operand i of batch c by a cut, where the operand has a
        node for the named set it was cut from, the lost positions among its children."""
        where = self.positions[(c, h)]
        if isinstance(where, list):
            return False
        hq, epos = where
        x = self._node(c, i, hq)
        if x is None or x.kind != PNODE:
            return False
        tree = self.tree
        o, leaves = self.ops[c][i], tree._leaves
        lost = list(map(leaves.__getitem__, map(o.__getitem__, epos)))
        for y in lost:
            if y.parent is not x:
                return False
        if x.nch - len(lost) < 2:
            return x.nch - len(lost) == 1     # the one child left holds the set
        gone = set(lost) if len(lost) > 4 else lost
        prev, y = None, x.end0
        while y in gone:
            prev, y = y, (y.s1 if y.s0 is prev else y.s0)
        while y.kind != LEAF:
            y = y.end0
        changed = tree._cut(x, lost, y.leaf)
        self._note(c, i, h, x)
        self._notify(changed, None, skipop=(c, i))
        return True

    def _resolve(self, c, h):
        """The positions named h in batch c, as a list."""
        chain = []
        where = self.positions[(c, h)]
        while not isinstance(where, list):
            chain.append((h, where[1]))
            h = where[0]
            where = self.positions[(c, h)]
        for h, epos in reversed(chain):
            lost = set(epos)
            where = self.positions[(c, h)] = [p for p in where if p not in lost]
        return where

    def _broadcast(self, c):
        """Make the subtrees of c's operands isomorphic: give each operand, carried over by
        position, the constraints of every other operand's subtree that it lacks."""
        js = [j for j, a in enumerate(self.on[c]) if a]
        if len(js) < 2:
            return True
        group = [self.ops[c][j] for j in js]
        subs = self._subtrees(c, js)
        if subs is None:
            return False
        tree = self.tree
        sigs = [s.signature() for s in subs]
        if all(sig == sigs[0] for sig in sigs):
            return True
        # With disjoint operands each reduce below changes only its own operand's subtree,
        # which then is the intersection of all: no need to look at c again for it.
        skip = c if self.disjoint[c] else -1
        for o, t, tsig in zip(group, subs, sigs):
            have = t.satisfied()
            done = set()
            live = t.nodes_by_name()
            for s, sig in zip(subs, sigs):
                if sig == tsig:
                    continue
                carry = _Carry(tree, s, o, live)
                for name, parts in s.constraints():
                    if name in have or name in done:
                        continue
                    done.add(name)
                    units = carry.units(parts)
                    changed = tree._reduce(units)
                    if changed is None:
                        return False
                    if changed:
                        self._notify(changed, units, skip, units=True)
                    if tree._exact is not None:
                        live[name] = tree._exact
        return True

    # ------------------------------------------------------------ DecideNodesOrder, GetLeafOrder

    def leaf_order(self, by_worth):
        tree = self.tree
        if tree.root is None:
            return []
        uf = OrderUnionFind()
        numbered = set()
        for b in by_worth:
            if self.nact[b] > 1:
                self._join(b, uf, numbered)
        up, find = uf.up, uf.find
        order, stack = [], [tree.root]
        push, pop, emit = stack.append, stack.pop, order.append
        while stack:
            x = pop()
            if x.kind == LEAF:
                emit(x.leaf)
                continue
            # push from the far end of the order to take: a node in a class follows its class
            # root's stored order, any other node its own
            c = x.end1
            if x in up:
                if x.kind == PNODE and x.nch > 2:
                    t = find(x, None)[1]
                    if t is not None:
                        ranked = [None] * x.nch
                        prev, c = None, x.end0
                        for i in t:
                            ranked[i] = c
                            prev, c = c, (c.s1 if c.s0 is prev else c.s0)
                        ranked.reverse()
                        stack.extend(ranked)
                        continue
                elif find(x, 0)[1]:
                    c = x.end0
            prev = None
            while c is not None:
                push(c)
                prev, c = c, (c.s1 if c.s0 is prev else c.s0)
        return order

    def _join(self, b, uf, numbered):
        """DecideNodesOrder for batch b; operands that cannot join leave its group."""
        on = self.on[b]
        js = [j for j, a in enumerate(on) if a]
        subs = [self.sub[b][j] or restrict(self.tree, self.ops[b][j]) for j in js]
        for j in _unite(js, subs, uf, numbered):
            on[j] = False

    def _conflicted(self, b):
        """An operand of b whose node orders contradict those of b's other operands, or None.

        Broadcasting makes subtrees isomorphic, which is not enough where operands share tree
        nodes (a shared variable set, or runs of one Q-node): a group that can never be
        aligned as a whole would still constrain the tree for everyone after it.
        """
        js = [j for j, a in enumerate(self.on[b]) if a]
        if len(js) < 2:
            return None
        if self.disjoint[b] and all(self._node(b, j, sum(_keys[:self.m[b]])) for j in js):
            return None                 # each operand a node of its own: nothing shared
        subs = self._subtrees(b, js)
        if subs is None:
            return js[-1]
        if self.disjoint[b]:
            qs = [s.ends[0].parent for s in subs if s.ends is not None]
            if len(set(qs)) == len(qs):
                return None
        bad = _unite(js, subs, OrderUnionFind(), set())
        return bad[0] if bad else None


def _variables(units):
    """The leaves of the given nodes."""
    out = []
    stack = list(units)
    while stack:
        x = stack.pop()
        if x.kind == LEAF:
            out.append(x.leaf)
            continue
        prev, c = None, x.end0
        while c is not None:
            stack.append(c)
            prev, c = c, (c.s1 if c.s0 is prev else c.s0)
    return out


def _unite(js, subs, uf, numbered):
    """Union the node orders of operands js[1:] with those of js[0] (ED-Batch's
    ParseEquivNodeOrderPair + Union); the operands whose subtree differs or whose
    equivalences contradict earlier ones (taken back out of `uf`)."""
    if subs[0] is None:
        return js[1:]
    ref = _stored_order(subs[0], numbered)
    sig = subs[0].signature()
    refnodes = {name: (node, seq) for name, node, _, seq, _ in ref}
    ranks = {}
    bad = []
    for j, s in zip(js[1:], subs[1:]):
        if s is None or s.signature() != sig:
            bad.append(j)
            continue
        uf.checkpoint()
        for name, node, kind, seq, _ in _stored_order(s, numbered):
            rnode, rseq = refnodes[name]
            if kind == DIR:
                t = 0 if seq[0] == rseq[0] else 1
            else:
                rank = ranks.get(name)
                if rank is None:
                    rank = ranks[name] = {h: i for i, h in enumerate(rseq)}
                t = [rank[h] for h in seq]
            if not uf.union(node, rnode, t):
                uf.rollback()
                bad.append(j)
                break
    return bad


def _stored_order(sub, numbered):
    """The subtree's nodes with a run read in its Q-node's stored order (the Q-node may have
    changed since the subtree was taken: the run's own nodes have not)."""
    if sub.ends is None:
        return sub.nodes
    first, last = sub.ends
    q = first.parent
    if q not in numbered:
        numbered.add(q)
        PQTree._number_children(q)
    name, _, kind, seq, m = sub.nodes[-1]
    if first.idx > last.idx:
        seq = seq[::-1]
    return sub.nodes[:-1] + [(name, q, kind, seq, m)]


class _Carry:
    """Carries constraints from the subtree `src` of one operand onto operand `dst`.

    A constraint's set is handed to the reduce as whole subtrees where `dst` already has a
    node for a part (`live`, by name), else as the parts' own parts, down to leaves; so copying
    a subtree costs about its number of nodes, not their total size.
    """

    def __init__(self, tree, src, dst, live):
        self.tree, self.dst, self.live = tree, dst, live
        kids, size, first = self.kids, self.size, self.first = {}, {}, {}
        for name, _, _, seq, n in src.nodes:
            kids[name] = seq
            size[name] = n
            h = seq[0]
            first[name] = first[h] if h in first else position[h]

    def units(self, parts):
        leaves, root = self.tree._leaves, self.tree.root
        dst, live, kids, size, first = self.dst, self.live, self.kids, self.size, self.first
        out = []
        stack = list(parts)
        while stack:
            name = stack.pop()
            seq = kids.get(name)
            if seq is None:
                out.append(leaves[dst[position[name]]])
                continue
            node = live.get(name)
            # a node stays the named set until a template changes its size or drops it
            if node is not None and node.size == size[name] and (
                    node.parent is not None or node is root):
                node.rep = dst[first[name]]
                out.append(node)
            else:
                stack.extend(seq)
        return out


def _choose_perm(pos, batch, on):
    """The node order that aligns the most operands, among the orders of contiguous operands
    (the planned group first), with the truth about every operand under it.

    An operand is aligned under an order iff it is contiguous and its slots, less their least,
    are the order's ranks: so each operand is reduced to that shape once, and an order's
    score is how many operands share its shape."""
    k = len(batch)
    m = len(batch[0]) if batch else 0
    if m <= 1:
        return list(range(m)), [True] * k
    shapes = []
    for o in batch:
        slots = list(map(pos.__getitem__, o))
        lo = min(slots)
        if max(slots) - lo == m - 1 and len(set(slots)) == m:
            shapes.append(tuple(map(lo.__rsub__, slots)))
        else:
            shapes.append(None)
    planned = [j for j in range(k) if on is not None and on[j]]
    rest = [j for j in range(k) if on is None or not on[j]]
    ncontiguous = k - shapes.count(None)
    best, best_score = tuple(range(m)), -1
    tried = set()
    for j in planned + rest:
        shape = shapes[j]
        if shape is None or shape in tried:
            continue
        tried.add(shape)
        score = shapes.count(shape)
        if score > best_score:
            best, best_score = shape, score
            if score == ncontiguous:
                break
    return sorted(range(m), key=best.__getitem__), [shape == best for shape in shapes]
