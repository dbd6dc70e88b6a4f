"""Memory order for batched variables: ED-Batch's PQ-tree memory planning (§3, Alg. 2–7).

A batch runs its nodes in one order (`perm`); an operand is *aligned* when its variables, taken
in that order, occupy consecutive ascending slots, so the executor can pass a view instead of a
gather.  The passes follow the paper: each operand's variable set must be consecutive (PQ tree,
adjacency); BroadcastConstraint makes the subtrees of a batch's operands isomorphic; DecideNodesOrder joins corresponding P-node
permutations and Q-node directions in a union–find; GetLeafOrder reads the order off the tree.

Where constraints conflict the heavier batch wins: batches are taken by weight (variables ×
`weights[b]`), and each batch is one transaction — its adjacency reduces, its broadcast and the
re-broadcast of every earlier batch it disturbs either all succeed or are rolled back, after
which the batch keeps what it can (dropping the operand whose adjacency failed, else adding its
operands one by one), so a lighter batch never costs an earlier one an operand.  Without any
conflict the result does not depend on the order, and a cheaper order is tried first.

A batch is broadcast whole once, when it joins; after that a reduce that changes one of its
operands queues only what that operand gained (the reduced set's positions in it, and where the
set reached outside it, the rest of the operand) to be carried to its other operands.  So the
cascade through the heavier batches a lighter one disturbs costs about the size of the new
constraint per batch, not the size of every operand it passes.
`aligned` is always measured on the final order, never assumed.
"""

from collections import deque
from operator import index
from typing import NamedTuple

from .gcpause import paused_gc
from .pqtree import LEAF, PNODE, PQTree
from .subtree import DIR, _keys, keys, position, restrict
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
        keys(max(self.m, default=0))       # position keys, for naming carried sets
        occ = self.occ = [[] for _ in range(n)]     # variable -> (batch, operand, position)
        self.cand = []          # per batch: operands that can be aligned and constrain anything
        self.disjoint = []      # per batch: are those pairwise disjoint
        for b, batch in enumerate(ops):
            cand = [j for j, o in enumerate(batch) if len(o) >= 2 and len(set(o)) == len(o)]
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
        self._fresh_queue()

    def _fresh_queue(self):
        self.queue = deque()    # (batch, positions, their key) to carry; positions None: all
        self.full = set()       # batches with a whole broadcast pending
        self.done = set()       # (batch, key) carried or queued in this transaction

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

    def _push(self, c):
        if c not in self.full:
            self.full.add(c)
            self.queue.append((c, None, 0))

    def _drain(self):
        """Carry queued constraints to the fixpoint."""
        queue, full = self.queue, self.full
        while queue:
            c, pos, key = queue.popleft()
            if pos is None:
                full.discard(c)
                ok = self._broadcast(c)
            else:
                ok = self._carry(c, pos, key)
            if not ok:
                return False
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
        self._fresh_queue()
        self._push(b)
        self.culprit = None
        ok = True
        leaves = tree._leaves
        for j in new:
            changed = tree._reduce([leaves[v] for v in self.ops[b][j]])
            if changed is None:
                self.culprit = j
                ok = False
                break
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

    def _forget(self):
        for c, j in self.made:
            self.sub[c][j] = None

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

    def _notify(self, changed, reduced, skip=-1, skipkey=None, units=False):
        """After a reduce of the set `reduced` (variables, or with `units` the nodes it was
        given) changed the tree: forget the subtrees that hold a changed node, and queue, for
        each such operand of an accepted batch (but `skip`), what its subtree gained, to be
        carried to the batch's other operands: the positions of the set within the operand,
        and where the set reaches outside it, the other positions (the part inside must then
        be an end of the operand)."""
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
        if units:
            reduced = _variables(reduced)
        for v in reduced:
            for c, j, i in occ[v]:
                pos = hit.get((c, j))
                if pos is not None:
                    pos.append(i)
        key, full, done, queue = _keys, self.full, self.done, self.queue
        for (c, j), pos in hit.items():
            mc, k = m[c], len(pos)
            if k == mc or c in full:
                continue
            h = sum(key[p] for p in pos)
            parts = [(pos, h)] if k >= 2 else []
            if len(reduced) > k and mc - k >= 2:
                inside = set(pos)
                parts.append(([p for p in range(mc) if p not in inside],
                              sum(key[:mc]) - h))
            for part, h in parts:
                tag = (c, h)
                if tag != skipkey and tag not in done:
                    done.add(tag)
                    queue.append((c, part, h))

    def _carry(self, c, pos, h):
        """Make the positions `pos` consecutive in every operand of c."""
        tree = self.tree
        leaves, ops = tree._leaves, self.ops[c]
        tag = (c, h)
        for i, a in enumerate(self.on[c]):
            if a:
                o = ops[i]
                vs = [o[p] for p in pos]
                changed = tree._reduce([leaves[v] for v in vs])
                if changed is None:
                    return False
                if changed:
                    self._notify(changed, vs, skipkey=tag)
        return True

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
