"""PyTorch training baselines: what a PyTorch user runs instead of lazyarray's training, in two
forms per model, trained with autograd and torch.optim:

- "instance": the model written over ONE instance (recursion over a tree, a loop over a
  sentence), the minibatch loss the sum of the instances' losses, one backward per minibatch;
- "batched": batched by hand the way hand_trees / hand_chains / hand_lattices batch inference
  (TreeLSTM level by level, chains and lattices step by step over length-sorted instances,
  Tree-FC level by level), with autograd doing the backward.

Embedding tables get sparse gradients (`F.embedding(..., sparse=True)`), as a careful user
would: a dense gradient costs a vocabulary-sized array per step (per leaf, written per
instance). The losses are summed (Tree-FC: the sum of all entries of the roots' sum).

    step = make_step("treelstm", params, optimizer="adagrad", lr=0.05, form="batched")
    loss = step(trees)      # params (numpy Params) updated in place: the tensors share memory
    loss, grads = loss_and_grads("treelstm", params, trees, form="instance")

`reference_losses` is the reference TreeLSTM sentiment training run that
`python -m lazyarray train` is checked against.
"""
import numpy as np
import torch
import torch.nn.functional as F

from lazyarray.workloads.params import Params

from .hand_lattices import LatticeBatch
from .train_hand import Packed

__all__ = ["MODELS", "make_step", "loss_and_grads", "reference_losses", "tensors"]


def _long(a):
    return torch.from_numpy(np.ascontiguousarray(a, np.int64))


def _embed(table, ids):
    return F.embedding(_long(ids), table, sparse=True)


def _nll(logits, label):
    return -torch.log_softmax(logits, 0)[label]


def _lstm(W, b, x, h, c):
    i, f, o, u = (W @ torch.cat([x, h]) + b).chunk(4)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(u)
    return torch.sigmoid(o) * torch.tanh(c), c


# per instance

def treelstm_instance(p, trees):
    total = 0
    for tree in trees:
        x = _embed(p.E, tree.leaf_words)
        leaf_row = np.cumsum(tree.words >= 0) - 1
        losses = []

        def encode(node):
            if node.is_leaf:
                i, o, u = (p.W_leaf @ x[leaf_row[node.index]] + p.b_leaf).chunk(3)
                c = torch.sigmoid(i) * torch.tanh(u)
            else:
                hl, cl = encode(node.left)
                hr, cr = encode(node.right)
                i, fl, fr, o, u = (p.U @ torch.cat([hl, hr]) + p.b).chunk(5)
                c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cl + torch.sigmoid(fr) * cr
            h = torch.sigmoid(o) * torch.tanh(c)
            losses.append(_nll(p.W_out @ h + p.b_out, node.label))
            return h, c

        encode(tree.root)
        total = total + torch.stack(losses).sum()
    return total


def treefc_instance(p, trees):
    roots = []
    for tree in trees:
        x = _embed(p.E, tree.leaf_words)
        leaf_row = np.cumsum(tree.words >= 0) - 1

        def encode(node):
            if node.is_leaf:
                return x[leaf_row[node.index]]
            return torch.relu(p.W @ torch.cat([encode(node.left), encode(node.right)]) + p.b)

        roots.append(encode(tree.root))
    return torch.stack(roots).sum()


def bilstm_instance(p, sentences):
    H = p.E.shape[1]
    total = 0
    for s in sentences:
        xs = _embed(p.E, s.words).unbind()
        runs = []
        for W, b, seq in ((p.Wf, p.bf, xs), (p.Wb, p.bb, xs[::-1])):
            h = c = torch.zeros(H, dtype=p.E.dtype)
            hs = []
            for x in seq:
                h, c = _lstm(W, b, x, h, c)
                hs.append(h)
            runs.append(hs)
        z = torch.stack([torch.cat([f, b]) for f, b in zip(runs[0], runs[1][::-1])])
        logits = torch.tanh(z @ p.W_mlp.T + p.b_mlp) @ p.W_out.T + p.b_out
        total = total + F.cross_entropy(logits, _long(s.tags), reduction="sum")
    return total


def latticelstm_instance(p, lattices):
    H = p.C.shape[1]
    total = 0
    for lat in lattices:
        chars = _embed(p.C, lat.chars).unbind()
        words = _embed(p.E_w, [w for _, _, w in lat.words]).unbind()
        incoming = [[] for _ in lat.chars]
        starting = [[] for _ in lat.chars]
        for k, (s, e, _) in enumerate(lat.words):
            starting[s].append((e, k))
        h = c = torch.zeros(H, dtype=p.C.dtype)
        hs = []
        for j, x in enumerate(chars):
            i, f, o, u = (p.W_c @ torch.cat([x, h]) + p.b_c).chunk(4)
            if incoming[j]:
                gates = torch.sigmoid(torch.stack(
                    [i] + [p.W_l @ torch.cat([x, cw]) + p.b_l for cw in incoming[j]]))
                c = (torch.softmax(gates, 0) * torch.stack([torch.tanh(u), *incoming[j]])).sum(0)
            else:
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(u)
            h = torch.sigmoid(o) * torch.tanh(c)
            hs.append(h)
            for e, k in starting[j]:
                wi, wf, wu = (p.W_w @ torch.cat([words[k], h]) + p.b_w).chunk(3)
                incoming[e - 1].append(torch.sigmoid(wf) * c + torch.sigmoid(wi) * torch.tanh(wu))
        total = total + F.cross_entropy(torch.stack(hs) @ p.W_out.T + p.b_out, _long(lat.tags),
                                        reduction="sum")
    return total


# batched by hand

class Consumed:
    """Trees renumbered level by level (leaves first, `bounds[k]:bounds[k+1]` = height k) and,
    within a level, grouped by the height of the node's parent (roots last): the rows of level
    j that level k reads are then one block, `pieces[j][k - j - 1]` rows long, and
    `children[2q], children[2q + 1]` are where the children of internal node q (in level
    order) sit in the concatenation, over j < k, of those blocks."""

    def __init__(self, trees):
        sizes = np.array([len(t) for t in trees])
        offset = np.repeat(np.cumsum(sizes) - sizes, sizes)
        height = np.concatenate([t.height for t in trees])
        left = np.concatenate([t.left for t in trees]) + offset
        right = np.concatenate([t.right for t in trees]) + offset
        internal = np.flatnonzero(height > 0)
        top = height.max() + 1
        consumer = np.full(len(height), top)
        consumer[left[internal]] = consumer[right[internal]] = height[internal]
        order = np.lexsort((consumer, height))
        self.bounds = np.searchsorted(height[order], np.arange(top + 1))
        self.words = np.concatenate([t.words for t in trees])[order[:self.bounds[1]]]
        self.labels = np.concatenate([t.labels for t in trees])[order]
        self.pieces = [np.bincount(consumer[order[a:b]] - j - 1, minlength=top - j).tolist()
                       for j, (a, b) in enumerate(zip(self.bounds[:-1], self.bounds[1:]))]
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        read = np.lexsort((rank, consumer))       # each level's reads, in concatenation order
        first = np.searchsorted(consumer[read], np.arange(top + 1))
        position = np.empty_like(order)
        position[read] = np.arange(len(read)) - first[consumer[read]]
        q = order[self.bounds[1]:]
        self.children = np.stack([position[left[q]], position[right[q]]], 1).ravel()


def treelstm_batched(p, trees):
    """Level by level, each level's [h | c] one tensor split into the blocks later levels read
    (see Consumed): a level concatenates its blocks and gathers its children's rows from them.
    A level's rows are split once and every block read once, so autograd's backward never
    builds an array of all nodes per level (as a shared buffer with index_copy_ would: 10-15%
    slower at H=128 and 256)."""
    f = Consumed(trees)
    H, L = p.E.shape[1], f.bounds[1]
    children = _long(f.children)
    i, o, u = (_embed(p.E, f.words) @ p.W_leaf.T + p.b_leaf).chunk(3, 1)
    c = torch.sigmoid(i) * torch.tanh(u)
    hs = [torch.sigmoid(o) * torch.tanh(c)]
    blocks = [torch.cat([hs[0], c], 1).split(f.pieces[0])]
    for k, (a, b) in enumerate(zip(f.bounds[1:-1], f.bounds[2:]), start=1):
        n = b - a
        read = torch.cat([blocks[j][k - j - 1] for j in range(k)])
        pair = read.index_select(0, children[2 * (a - L):2 * (b - L)]).view(n, 2, 2 * H)
        i, forget, o, u = (pair[:, :, :H].reshape(n, 2 * H) @ p.U.T + p.b).split([H, 2 * H, H, H], 1)
        c = torch.sigmoid(i) * torch.tanh(u) + (torch.sigmoid(forget).view(n, 2, H) * pair[:, :, H:]).sum(1)
        hs.append(torch.sigmoid(o) * torch.tanh(c))
        blocks.append(torch.cat([hs[-1], c], 1).split(f.pieces[k]))
    return F.cross_entropy(torch.cat(hs) @ p.W_out.T + p.b_out, _long(f.labels), reduction="sum")


def treefc_batched(p, trees):
    """As hand_trees.treefc: siblings are adjacent rows at every level, one reshape per level."""
    if len({len(t) for t in trees}) > 1:
        raise ValueError("hand-batched Tree-FC needs complete trees of one size")
    h = _embed(p.E, np.concatenate([t.leaf_words for t in trees]))
    while len(h) > len(trees):
        h = torch.relu(h.reshape(len(h) // 2, -1) @ p.W.T + p.b)
    return h.sum()


def _lstm_packed(pk, x, W, b):
    """One direction over train_hand.Packed's step-major rows: the running sentences of a step
    are a prefix, so each step slices the previous h, c."""
    H = x.shape[1]
    gates_x = x @ W[:, :H].T + b
    Wh = W[:, H:].T
    hs, h, c = [], None, None
    for n, a in zip(pk.running.tolist(), pk.offsets.tolist()):
        g = gates_x[a:a + n]
        if h is not None:
            g = g + h[:n] @ Wh
        i, f, o, u = g.chunk(4, 1)
        c = torch.sigmoid(i) * torch.tanh(u) + (0 if c is None else torch.sigmoid(f) * c[:n])
        h = torch.sigmoid(o) * torch.tanh(c)
        hs.append(h)
    return torch.cat(hs)


def bilstm_batched(p, sentences):
    pk = Packed(sentences)
    fwd = _lstm_packed(pk, _embed(p.E, pk.words), p.Wf, p.bf)
    bwd = _lstm_packed(pk, _embed(p.E, pk.words_backward), p.Wb, p.bb)
    z = torch.cat([fwd, bwd[_long(pk.to_backward)]], 1)
    logits = torch.tanh(z @ p.W_mlp.T + p.b_mlp) @ p.W_out.T + p.b_out
    return F.cross_entropy(logits, _long(pk.tags), reduction="sum")


def latticelstm_batched(p, lattices):
    """As hand_lattices.latticelstm, step by step, with the characters laid out step-major
    (a step's rows are contiguous) and the word cells kept in one buffer."""
    lb = LatticeBatch(lattices)
    H = p.C.shape[1]
    offsets = np.cumsum(lb.running) - lb.running
    rows = np.concatenate([lb.rows(j, n) for j, n in enumerate(lb.running)])
    x = _embed(p.C, lb.chars[rows])
    gates_x = x @ p.W_c[:, :H].T + p.b_c
    word_x = _embed(p.E_w, lb.lexicon_ids) @ p.W_w[:, :H].T + p.b_w
    c_word = torch.zeros(len(lb.lexicon_ids), H, dtype=p.C.dtype)
    hs, h, c = [], torch.zeros(len(lb.lengths), H, dtype=p.C.dtype), None
    for j, (n, a) in enumerate(zip(lb.running.tolist(), offsets.tolist())):
        i, f, o, u = (gates_x[a:a + n] + h[:n] @ p.W_c[:, H:].T).chunk(4, 1)
        c = torch.sigmoid(i) * torch.tanh(u) + (0 if c is None else torch.sigmoid(f) * c[:n])
        w, r, first, mixed = lb.ending[j]
        if len(w):
            segment = _long(np.repeat(np.arange(len(first)), np.diff(first, append=len(w))))
            w, r, mixed = _long(w), _long(r), _long(mixed)
            gate_w = torch.exp(torch.sigmoid(torch.cat([x[a + r], c_word[w]], 1) @ p.W_l.T + p.b_l))
            gate_c = torch.exp(torch.sigmoid(i[mixed]))
            zeros = torch.zeros(len(mixed), H, dtype=c.dtype)
            total = gate_c + zeros.index_add(0, segment, gate_w)
            mixed_in = zeros.index_add(0, segment, gate_w * c_word[w])
            c_mixed = (gate_c * torch.tanh(u[mixed]) + mixed_in) / total
            c = c.index_copy(0, mixed, c_mixed)
        h = torch.sigmoid(o) * torch.tanh(c)
        hs.append(h)
        w, r = lb.starting[j]
        if len(w):
            w, r = _long(w), _long(r)
            wi, wf, wu = (word_x[w] + h[r] @ p.W_w[:, H:].T).chunk(3, 1)
            c_word.index_copy_(0, w, torch.sigmoid(wf) * c[r] + torch.sigmoid(wi) * torch.tanh(wu))
    logits = torch.cat(hs) @ p.W_out.T + p.b_out
    return F.cross_entropy(logits, _long(lb.tags[rows]), reduction="sum")


MODELS = {
    "instance": {"treelstm": treelstm_instance, "treefc": treefc_instance,
                 "bilstm": bilstm_instance, "latticelstm": latticelstm_instance},
    "batched": {"treelstm": treelstm_batched, "treefc": treefc_batched,
                "bilstm": bilstm_batched, "latticelstm": latticelstm_batched},
}


def tensors(params):
    """Leaf tensors sharing the numpy arrays' memory, so that optimizer steps update them."""
    return Params(**{k: torch.from_numpy(v).requires_grad_() for k, v in params.items()})


def _optimizer(name, tensors, lr):
    if name == "sgd":
        return torch.optim.SGD(tensors, lr=lr)
    if name == "adagrad":
        # its sparse path warns unless the (default) choice not to check sparse tensors is explicit
        torch.sparse.check_sparse_tensor_invariants.disable()
        return torch.optim.Adagrad(tensors, lr=lr, eps=1e-10, initial_accumulator_value=0)
    raise ValueError(f"unknown optimizer {name!r}: choose 'sgd' or 'adagrad'")


def make_step(name, params, optimizer="sgd", lr=0.05, form="batched", threads=1):
    """`step(instances) -> loss`: forward and backward of the summed loss, then the optimizer
    step, updating `params` (numpy Params, whose memory the tensors share) in place.
    `threads`: torch's intra-op threads (process-wide)."""
    torch.set_num_threads(threads)
    model, p = MODELS[form][name], tensors(params)
    opt = _optimizer(optimizer, list(vars(p).values()), lr)

    def step(instances):
        opt.zero_grad()
        loss = model(p, instances)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def loss_and_grads(name, params, instances, form="batched", threads=1):
    """(summed loss, {parameter name: dense gradient as numpy}) without updating anything."""
    torch.set_num_threads(threads)
    p = tensors(params)
    loss = MODELS[form][name](p, instances)
    loss.backward()
    return loss.item(), {k: np.zeros_like(getattr(params, k)) if t.grad is None
                         else (t.grad.to_dense() if t.grad.is_sparse else t.grad).numpy()
                         for k, t in p.items()}


def reference_losses(numpy_params, trees, steps=20, batch=25, lr=0.05, seed=0, threads=1, dtype=np.float32):
    """The TreeLSTM sentiment reference run: Adagrad(lr, eps=1e-10) from a copy of
    `numpy_params` (in `dtype`) on minibatches of `batch` trees, consecutive slices of
    `default_rng(seed).permutation(len(trees))`; a step's loss is the minibatch's summed tree
    loss / batch. Returns the first `steps` step losses (each before its update) as floats."""
    torch.set_num_threads(threads)
    if steps * batch > len(trees):
        raise ValueError(f"{steps} steps of {batch} trees need {steps * batch} trees, got {len(trees)}")
    order = np.random.default_rng(seed).permutation(len(trees))
    p = tensors(Params(**{k: np.array(v, dtype) for k, v in numpy_params.items()}))
    opt = _optimizer("adagrad", list(vars(p).values()), lr)
    losses = []
    for k in range(steps):
        opt.zero_grad()
        loss = treelstm_batched(p, [trees[i] for i in order[k * batch:(k + 1) * batch]]) / batch
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
