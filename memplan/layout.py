"""Memory order for batched variables: ED-Batch's PQ-tree memory planning (§3, Alg. 2–7).

A batch runs its nodes in one order (`perm`); an operand is *aligned* when its variables, taken
in that order, occupy consecutive ascending slots, so the executor can pass a view instead of a
gather.  The passes follow the paper: each operand's variable set must be consecutive (PQ tree,
adjacency); BroadcastConstraint makes the subtrees of a batch's operands isomorphic, re-queueing
batches whose subtrees a reduce changed; DecideNodesOrder joins corresponding P-node
permutations and Q-node directions in a union–find; GetLeafOrder reads the order off the tree.

Where constraints conflict the heavier batch wins: batches are taken by weight (variables ×
`weights[b]`), and each batch is one transaction — its adjacency reduces, its broadcast and the
re-broadcast of every earlier batch it disturbs either all succeed or are rolled back, after
which the batch keeps what it can (dropping the operand whose adjacency failed, else adding its
operands one by one), so a lighter batch never costs an earlier one an operand.  Without any
conflict the result does not depend on the order, and a cheaper order is tried first.
`aligned` is always measured on the final order, never assumed.
"""

from collections import deque
from operator import index
from typing import NamedTuple

from .gcpause import paused_gc
from .pqtree import LEAF, PNODE, PQTree
from .subtree import DIR, position, restrict
from .unionfind import OrderUnionFind


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
    with paused_gc():
        return _layout(n, batches, weights)


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
    # first (on an unjournaled tree), and the weight order decides only when some constraint
    # has to be dropped.
    if not planner.broadcast(reversed(range(len(ops))), give_up=True):
        planner.reset()
        planner.broadcast(by_worth, give_up=False)
    order = planner.leaf_order(by_worth)
    pos = [0] * n
    for slot, v in enumerate(order):
        pos[v] = slot
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
        occ = self.occ = [[] for _ in range(n)]     # variable -> (batch, operand) holding it
        self.cand = []          # per batch: operands that can be aligned and constrain anything
        self.disjoint = []      # per batch: are those pairwise disjoint
        for b, batch in enumerate(ops):
            cand = [j for j, o in enumerate(batch) if len(o) >= 2 and len(set(o)) == len(o)]
            seen = set()
            for j in cand:
                seen.update(batch[j])
                for v in batch[j]:
                    occ[v].append((b, j))
            self.cand.append(cand)
            self.disjoint.append(len(seen) == len(cand) * self.m[b])
        self.reset()

    def reset(self):
        self.tree = PQTree(self.n)
        self.on = [None] * len(self.ops)    # per accepted batch: is operand j in its group
        self.nact = [0] * len(self.ops)
        self.sub = [[None] * len(o) for o in self.ops]  # operand subtrees while still current
        self.inq = set()

    # ------------------------------------------------------------ BroadcastConstraint

    def broadcast(self, batches, give_up):
        """Take the batches in turn; when one conflicts with those before it, keep what fits
        (or, with give_up, stop and return False: the tree is then unusable)."""
        if give_up:
            self.tree._journaled = False
        for b in batches:
            group = self.cand[b]
            if not group:
                continue
            while not self._attempt(b, group, group):
                if give_up:
                    return False
                bad = self.culprit
                if bad is None or len(group) == 1:
                    kept = []
                    for j in group:
                        if j != bad and self._attempt(b, kept + [j], [j]):
                            kept.append(j)
                    break
                group = [j for j in group if j != bad]
        return True

    def _attempt(self, b, group, new):
        """One transaction: batch b with operand group `group` (of which the operands `new` are
        not in the tree yet), and everything it disturbs.  On failure `culprit` is the operand
        to blame, if one is (its adjacency failed, or its node orders cannot join)."""
        tree = self.tree
        before, nbefore = self.on[b], self.nact[b]
        on = [False] * len(self.ops[b])
        for j in group:
            on[j] = True
        self.on[b], self.nact[b] = on, len(group)
        mark = tree._begin()
        self.made = []              # subtrees taken in this transaction
        queue = deque([b])
        self.inq = {b}
        self.culprit = None
        ok = True
        leaves = tree._leaves
        for j in new:
            changed = tree._reduce([leaves[v] for v in self.ops[b][j]])
            if changed is None:
                self.culprit = j
                ok = False
                break
            self._notify(changed, queue)
        while ok and queue:
            c = queue.popleft()
            self.inq.discard(c)
            ok = self._broadcast(c, queue)
        if ok:
            self.culprit = self._conflicted(b)
            ok = self.culprit is None
        if ok:
            tree._commit()
            return True
        tree._rollback(mark)
        self.on[b], self.nact[b] = before, nbefore
        for c, j in self.made:
            self.sub[c][j] = None
        return False

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

    def _notify(self, changed, queue, skip=-1):
        """Queue the accepted batches (but `skip`) with an operand whose subtree holds a
        changed node."""
        occ, on, m, nact, inq, sub = self.occ, self.on, self.m, self.nact, self.inq, self.sub
        for rep, size in changed:
            for c, j in occ[rep]:
                if nact[c] > 1 and on[c][j] and size <= m[c]:
                    sub[c][j] = None
                    if c not in inq and c != skip:
                        inq.add(c)
                        queue.append(c)

    def _broadcast(self, c, queue):
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
                    changed = tree._reduce(carry.units(parts))
                    if changed is None:
                        return False
                    self._notify(changed, queue, skip)
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
        up = uf.up
        order = []
        stack = [tree.root]
        while stack:
            x = stack.pop()
            if x.kind == LEAF:
                order.append(x.leaf)
                continue
            ch = []
            prev, c = None, x.end0
            while c is not None:
                ch.append(c)
                prev, c = c, (c.s1 if c.s0 is prev else c.s0)
            if x in up:                 # its order follows its class root's stored one
                if x.kind == PNODE and x.nch > 2:
                    t = uf.find(x, None)[1]
                    if t is not None:
                        ranked = [None] * len(ch)
                        for i, c in enumerate(ch):
                            ranked[t[i]] = c
                        ch = ranked
                elif uf.find(x, 0)[1]:
                    ch.reverse()
            ch.reverse()
            stack.extend(ch)
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
        subs = self._subtrees(b, js)
        if subs is None:
            return js[-1]
        if self.disjoint[b]:
            qs = [s.ends[0].parent for s in subs if s.ends is not None]
            if len(set(qs)) == len(qs):
                return None
        bad = _unite(js, subs, OrderUnionFind(), set())
        return bad[0] if bad else None


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
    (the planned group first), with the truth about every operand under it."""
    k = len(batch)
    m = len(batch[0]) if batch else 0
    if m <= 1:
        return list(range(m)), [True] * k
    first = [j for j in range(k) if on is not None and on[j]]
    rest = [j for j in range(k) if on is None or not on[j]]
    contiguous = []
    for j in first + rest:
        slots = [pos[v] for v in batch[j]]
        if max(slots) - min(slots) == m - 1 and len(set(slots)) == m:
            contiguous.append(slots)
    best_perm, best, best_score = list(range(m)), None, -1
    tried = set()
    for slots in contiguous:
        perm = sorted(range(m), key=slots.__getitem__)
        key = tuple(perm)
        if key in tried:
            continue
        tried.add(key)
        flags = [_aligned(pos, o, perm) for o in batch]
        score = sum(flags)
        if score > best_score:
            best_perm, best, best_score = perm, flags, score
            if score == len(contiguous):
                break
    if best is None:
        best = [_aligned(pos, o, best_perm) for o in batch]
    return best_perm, best


def _aligned(pos, operand, perm):
    base = pos[operand[perm[0]]]
    for i, k in enumerate(perm):
        if pos[operand[k]] != base + i:
            return False
    return True
