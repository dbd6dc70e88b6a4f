"""Hand-batched numpy training steps (forward, backward written out by hand, optimizer update):
the yardstick a careful numpy user would otherwise write for lazyarray's training.

    step = make_step("treelstm", params, optimizer="adagrad", lr=0.05)
    loss = step(trees)                     # updates params (numpy Params) in place
    loss, grads = loss_and_grads("treelstm", params, trees)   # dense gradients, for tests

TreeLSTM runs level by level (all leaves, then internal nodes by height) with the nodes
renumbered level after level, so that every level is one contiguous block of rows; a node's h
and c are also written at its *slot* (row 2j or 2j+1 of its parent j), so that a level reads
[h_l; h_r] as one contiguous (n, 2H) block with no gather, and its backward writes the
children's gradients there the same way. The BiLSTM tagger runs its sentences sorted by length
in step-major rows (as PyTorch's PackedSequence): the sentences still running at step t are a
prefix, so the recurrence slices instead of gathering. Both keep the gate pre-activation
gradients of all nodes (all steps) in one array, so that each weight's gradient is one matmul,
and return the embedding gradient as `SparseRows` (touched rows only), applied sparsely.
"""
from typing import NamedTuple

import numpy as np

__all__ = ["MODELS", "OPTIMIZERS", "SparseRows", "make_step", "loss_and_grads"]


class SparseRows(NamedTuple):
    """Gradient of an embedding table: `values[k]` for row `rows[k]` (distinct rows), 0
    elsewhere; a step never builds a vocabulary-sized array."""

    rows: np.ndarray
    values: np.ndarray

    def dense(self, shape):
        out = np.zeros(shape, self.values.dtype)
        out[self.rows] = self.values
        return out


class Workspace:
    """Arrays reused across steps (and scratch reused within one): a fresh array over a few
    hundred KB is a fresh mmap whose pages fault in on first touch, which on this machine
    makes `1 - s` on a 1 MB array 10-20x slower than into a kept buffer."""

    def __init__(self, dtype):
        self.dtype, self.buffers = dtype, {}

    def __call__(self, name, *shape):
        size = int(np.prod(shape))
        buf = self.buffers.get(name)
        if buf is None or buf.size < size:
            buf = self.buffers[name] = np.empty(size + size // 4, self.dtype)
        return buf[:size].reshape(shape)


def _sigmoid_(x):
    """σ(x) = (1 + tanh(x / 2)) / 2 in place (hand_ops.sigmoid's identity, no temporaries)."""
    x *= 0.5
    np.tanh(x, out=x)
    x += 1
    x *= 0.5


def _sigmoid_grad_(d, s, tmp):
    """d *= σ'(x) = s (1 - s), given s = σ(x); tmp: scratch of d's shape."""
    np.subtract(1, s, out=tmp)
    tmp *= s
    d *= tmp


def _tanh_grad_(d, t, tmp):
    """d *= tanh'(x) = 1 - t², given t = tanh(x); tmp: scratch of d's shape."""
    np.multiply(t, t, out=tmp)
    np.subtract(1, tmp, out=tmp)
    d *= tmp


def _take(a, rows, out):
    """a[rows] into out; mode="clip" because numpy buffers `out` under the default "raise"
    (the rows are valid by construction)."""
    return np.take(a, rows, axis=0, out=out, mode="clip")


def _nll(logits, labels):
    """(sum over rows of -log_softmax(row)[label], its gradient wrt the logits)."""
    rows = np.arange(len(labels))
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1)
    loss = float(np.log(s).sum(dtype=np.float64) - z[rows, labels].sum(dtype=np.float64))
    e /= s[:, None]
    e[rows, labels] -= 1
    return loss, e


class _RowSum:
    """Sums rows of a (len(ids), H) array by id: the sparse gradient of an embedding lookup,
    by one stable sort and one np.add.reduceat."""

    def __init__(self, ids):
        self.order = np.argsort(ids, kind="stable")
        sorted_ids = ids[self.order]
        self.starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
        self.rows = sorted_ids[self.starts]

    def __call__(self, dx, ws):
        return SparseRows(self.rows, np.add.reduceat(_take(dx, self.order, ws("sorted", *dx.shape)),
                                                     self.starts, axis=0))


# TreeLSTM

class Levels:
    """Trees renumbered level by level: level k = rows bounds[k]:bounds[k+1] (leaves first,
    `n_leaf` of them); internal node j (row n_leaf + j) reads its children at slots 2j, 2j+1;
    `slot[i]` is row i's slot (roots get slots past 2 * n_internal, which nothing reads)."""

    def __init__(self, trees):
        sizes = np.array([len(t) for t in trees])
        offset = np.repeat(np.cumsum(sizes) - sizes, sizes)
        height = np.concatenate([t.height for t in trees])
        order = np.argsort(height, kind="stable")
        new = np.empty_like(order)
        new[order] = np.arange(len(order))
        self.bounds = np.searchsorted(height[order], np.arange(height.max() + 2))
        n_leaf = self.n_leaf = int(self.bounds[1])
        self.n_internal = len(order) - n_leaf
        self.words = np.concatenate([t.words for t in trees])[order[:n_leaf]]
        self.labels = np.concatenate([t.labels for t in trees])[order]
        internal = order[n_leaf:]
        self.slot = np.empty(len(order), np.int64)
        for side, children in enumerate((np.concatenate([t.left for t in trees]),
                                         np.concatenate([t.right for t in trees]))):
            self.slot[new[(children + offset)[internal]]] = 2 * np.arange(self.n_internal) + side
        self.slot[new[np.cumsum(sizes) - 1]] = 2 * self.n_internal + np.arange(len(trees))
        self.embedding_grad = _RowSum(self.words)


class TreeLSTM:
    """Loss and gradients of a minibatch of trees; one instance keeps its buffers across steps
    (the gradients it returns live in them: valid until its next call)."""

    def __init__(self, dtype=np.float32):
        self.ws = Workspace(dtype)

    def __call__(self, p, trees):
        f, ws = Levels(trees), self.ws
        H, L, M = p.E.shape[1], f.n_leaf, f.n_internal
        N, S = L + M, 2 * M + len(trees)
        h_all, tanh_c = ws("h", N, H), ws("tanh_c", N, H)
        h_slot, c_slot = ws("h_slot", S, H), ws("c_slot", S, H)
        children_h = h_slot[:2 * M].reshape(M, 2 * H)   # [h_l; h_r] of every internal node
        children_c = c_slot[:2 * M].reshape(M, 2, H)
        acts = ws("acts", M, 5 * H)                      # σ(i), σ(fl), σ(fr), σ(o), tanh(u)
        levels = list(zip(f.bounds[1:-1], f.bounds[2:]))

        # forward: leaves, then internal levels; what backward needs stays in h_slot, c_slot,
        # acts, tanh_c
        x = _take(p.E, f.words, ws("x", L, H))
        leaf = np.matmul(x, p.W_leaf.T, out=ws("leaf", L, 3 * H))
        leaf += p.b_leaf
        _sigmoid_(leaf[:, :2 * H])
        np.tanh(leaf[:, 2 * H:], out=leaf[:, 2 * H:])
        c = np.multiply(leaf[:, :H], leaf[:, 2 * H:], out=ws("c", L, H))
        np.tanh(c, out=tanh_c[:L])
        np.multiply(leaf[:, H:2 * H], tanh_c[:L], out=h_all[:L])
        h_slot[f.slot[:L]] = h_all[:L]
        c_slot[f.slot[:L]] = c
        for a, b in levels:
            n, g = b - a, acts[a - L:b - L]
            np.matmul(children_h[a - L:b - L], p.U.T, out=g)
            g += p.b
            _sigmoid_(g[:, :4 * H])
            np.tanh(g[:, 4 * H:], out=g[:, 4 * H:])
            c = np.multiply(g[:, :H], g[:, 4 * H:], out=ws("c", n, H))
            forget = np.multiply(g[:, H:3 * H].reshape(n, 2, H), children_c[a - L:b - L],
                                 out=ws("tmp", n, 2, H))
            c += forget[:, 0]
            c += forget[:, 1]
            np.tanh(c, out=tanh_c[a:b])
            np.multiply(g[:, 3 * H:4 * H], tanh_c[a:b], out=h_all[a:b])
            h_slot[f.slot[a:b]] = h_all[a:b]
            c_slot[f.slot[a:b]] = c
        loss, d_logits = _nll(h_all @ p.W_out.T + p.b_out, f.labels)

        # backward: outputs of all nodes at once, then levels top down; a node's dh and dc
        # from its parent wait at its slot in dh_slot, dc_slot
        grads = {"W_out": d_logits.T @ h_all, "b_out": d_logits.sum(axis=0)}
        dh_all = np.matmul(d_logits, p.W_out, out=ws("dh", N, H))
        dh_slot, dc_slot = ws("dh_slot", S, H), ws("dc_slot", S, H)
        dh_slot[2 * M:] = 0
        dc_slot[2 * M:] = 0
        d_acts = ws("d_acts", M, 5 * H)
        for a, b in reversed(levels):
            n, g, dg = b - a, acts[a - L:b - L], d_acts[a - L:b - L]
            dh, dc = self._node_grads(f, a, b, dh_all, dh_slot, dc_slot, g[:, 3 * H:4 * H], tanh_c)
            np.multiply(dc, g[:, 4 * H:], out=dg[:, :H])
            np.multiply(dc[:, None], children_c[a - L:b - L], out=dg[:, H:3 * H].reshape(n, 2, H))
            np.multiply(dh, tanh_c[a:b], out=dg[:, 3 * H:4 * H])
            np.multiply(dc, g[:, :H], out=dg[:, 4 * H:])
            _sigmoid_grad_(dg[:, :4 * H], g[:, :4 * H], ws("tmp", n, 4 * H))
            _tanh_grad_(dg[:, 4 * H:], g[:, 4 * H:], ws("tmp", n, H))
            np.multiply(dc[:, None], g[:, H:3 * H].reshape(n, 2, H),
                        out=dc_slot[2 * (a - L):2 * (b - L)].reshape(n, 2, H))
            np.matmul(dg, p.U, out=dh_slot[2 * (a - L):2 * (b - L)].reshape(n, 2 * H))
        grads["U"] = np.matmul(d_acts.T, children_h, out=ws("dU", 5 * H, 2 * H))
        grads["b"] = d_acts.sum(axis=0)

        dh, dc = self._node_grads(f, 0, L, dh_all, dh_slot, dc_slot, leaf[:, H:2 * H], tanh_c)
        d_leaf = ws("d_leaf", L, 3 * H)
        np.multiply(dc, leaf[:, 2 * H:], out=d_leaf[:, :H])
        np.multiply(dh, tanh_c[:L], out=d_leaf[:, H:2 * H])
        np.multiply(dc, leaf[:, :H], out=d_leaf[:, 2 * H:])
        _sigmoid_grad_(d_leaf[:, :2 * H], leaf[:, :2 * H], ws("tmp", L, 2 * H))
        _tanh_grad_(d_leaf[:, 2 * H:], leaf[:, 2 * H:], ws("tmp", L, H))
        grads["W_leaf"] = np.matmul(d_leaf.T, x, out=ws("dW_leaf", 3 * H, H))
        grads["b_leaf"] = d_leaf.sum(axis=0)
        grads["E"] = f.embedding_grad(np.matmul(d_leaf, p.W_leaf, out=ws("dx", L, H)), ws)
        return loss, grads

    def _node_grads(self, f, a, b, dh_all, dh_slot, dc_slot, o, tanh_c):
        """dh and dc of rows a:b: their outputs' and their parents' parts (o = σ(o) gate)."""
        ws, n = self.ws, b - a
        dh = dh_all[a:b]
        dh += _take(dh_slot, f.slot[a:b], ws("tmp", n, dh.shape[1]))
        dc = _take(dc_slot, f.slot[a:b], ws("dc", n, dh.shape[1]))
        t = np.multiply(dh, o, out=ws("t", *dh.shape))
        _tanh_grad_(t, tanh_c[a:b], ws("tmp", *dh.shape))
        dc += t
        return dh, dc


# BiLSTM tagger

class Packed:
    """Sentences sorted by decreasing length in step-major rows: step t = rows
    offsets[t]:offsets[t] + running[t], one per sentence still running (a prefix of the sorted
    sentences). The forward LSTM reads token t at step t, the backward one token len-1-t;
    `to_backward[r]` is the backward layout's row of the token at forward row r."""

    def __init__(self, sentences):
        lengths = np.array([len(s) for s in sentences])
        order = np.argsort(-lengths, kind="stable")
        lengths = lengths[order]
        self.running = (lengths[None, :] > np.arange(lengths[0])[:, None]).sum(axis=1)
        self.offsets = np.cumsum(self.running) - self.running
        rank = np.concatenate([np.arange(n) for n in self.running])   # row -> sorted sentence
        t = np.repeat(np.arange(len(self.running)), self.running)      # row -> step
        token = (np.cumsum(lengths) - lengths)[rank] + t
        self.words = np.concatenate([sentences[k].words for k in order])[token]
        self.tags = np.concatenate([sentences[k].tags for k in order])[token]
        self.to_backward = self.offsets[lengths[rank] - 1 - t] + rank
        self.words_backward = np.empty_like(self.words)
        self.words_backward[self.to_backward] = self.words
        # each row past step 0: the previous step's row of its sentence
        self.previous = self.offsets[t[self.running[0]:] - 1] + rank[self.running[0]:]
        self.embedding_grad = _RowSum(self.words)


class _Run(NamedTuple):
    """One LSTM direction over Packed rows in its own layout: inputs, weight, and the h, c,
    tanh(c) and gates (σ(i), σ(f), σ(o), tanh(u)) of every row that its backward reads."""

    x: np.ndarray
    W: np.ndarray
    h: np.ndarray
    c: np.ndarray
    tanh_c: np.ndarray
    g: np.ndarray


def _lstm_forward(pk, run, b, ws):
    x, W, h, c, tanh_c, g = run
    H = x.shape[1]
    np.matmul(x, W[:, :H].T, out=g)
    g += b
    Wh = W[:, H:].T
    previous = None
    for n, a in zip(pk.running, pk.offsets):
        gt, ct = g[a:a + n], c[a:a + n]
        if previous is not None:
            gt += np.matmul(h[previous:previous + n], Wh, out=ws("tmp", n, 4 * H))
        _sigmoid_(gt[:, :3 * H])
        np.tanh(gt[:, 3 * H:], out=gt[:, 3 * H:])
        np.multiply(gt[:, :H], gt[:, 3 * H:], out=ct)
        if previous is not None:
            ct += np.multiply(gt[:, H:2 * H], c[previous:previous + n], out=ws("tmp", n, H))
        np.tanh(ct, out=tanh_c[a:a + n])
        np.multiply(gt[:, 2 * H:3 * H], tanh_c[a:a + n], out=h[a:a + n])
        previous = a


def _lstm_backward(pk, run, dh, dg, dW, dx, ws):
    """Backpropagation through time from dh (modified) at every row: the gates' gradients in
    dg, the weight's in dW, the inputs' in dx; returns the bias's."""
    x, W, h, c, tanh_c, g = run
    H = x.shape[1]
    Wh = W[:, H:]
    carry_h = carry_c = None   # what the next step's h and c send back to this step's
    steps = list(zip(pk.running, pk.offsets))
    for k in range(len(steps) - 1, -1, -1):
        n, a = steps[k]
        gt, dgt, dht = g[a:a + n], dg[a:a + n], dh[a:a + n]
        if carry_h is not None:
            dht[:len(carry_h)] += carry_h
        dct = np.multiply(dht, gt[:, 2 * H:3 * H], out=ws("dc", n, H))
        _tanh_grad_(dct, tanh_c[a:a + n], ws("tmp", n, H))
        if carry_c is not None:
            dct[:len(carry_c)] += carry_c
        np.multiply(dct, gt[:, 3 * H:], out=dgt[:, :H])
        if k:
            previous = steps[k - 1][1]
            np.multiply(dct, c[previous:previous + n], out=dgt[:, H:2 * H])
        else:
            dgt[:, H:2 * H] = 0
        np.multiply(dht, tanh_c[a:a + n], out=dgt[:, 2 * H:3 * H])
        np.multiply(dct, gt[:, :H], out=dgt[:, 3 * H:])
        _sigmoid_grad_(dgt[:, :3 * H], gt[:, :3 * H], ws("tmp", n, 3 * H))
        _tanh_grad_(dgt[:, 3 * H:], gt[:, 3 * H:], ws("tmp", n, H))
        if k:
            carry_c = np.multiply(dct, gt[:, H:2 * H], out=ws("carry_c", n, H))
            carry_h = np.matmul(dgt, Wh, out=ws("carry_h", n, H))
    first = pk.running[0]
    np.matmul(dg.T, x, out=dW[:, :H])
    np.matmul(dg[first:].T, _take(h, pk.previous, ws("tmp", len(pk.previous), H)), out=dW[:, H:])
    np.matmul(dg, W[:, :H], out=dx)
    return dg.sum(axis=0)


class BiLSTM:
    """Loss and gradients of a minibatch of sentences; keeps its buffers across steps (the
    gradients it returns included: valid until its next call)."""

    def __init__(self, dtype=np.float32):
        self.ws = Workspace(dtype)

    def __call__(self, p, sentences):
        pk, ws = Packed(sentences), self.ws
        R, H = len(pk.words), p.E.shape[1]
        z = ws("z", R, 2 * H)               # [hf; hb] per token, in the forward layout
        runs = [_Run(_take(p.E, words, ws(f"x{d}", R, H)), W, h, ws(f"c{d}", R, H),
                     ws(f"tanh_c{d}", R, H), ws(f"g{d}", R, 4 * H))
                for d, (words, W, h) in enumerate(((pk.words, p.Wf, z[:, :H]),
                                                   (pk.words_backward, p.Wb, ws("hb", R, H))))]
        for run, b in zip(runs, (p.bf, p.bb)):
            _lstm_forward(pk, run, b, ws)
        _take(runs[1].h, pk.to_backward, z[:, H:])
        m = np.matmul(z, p.W_mlp.T, out=ws("m", R, H))
        m += p.b_mlp
        np.tanh(m, out=m)
        loss, d_logits = _nll(m @ p.W_out.T + p.b_out, pk.tags)

        grads = {"W_out": d_logits.T @ m, "b_out": d_logits.sum(axis=0)}
        dm = np.matmul(d_logits, p.W_out, out=ws("dm", R, H))
        _tanh_grad_(dm, m, ws("tmp", R, H))
        grads["W_mlp"] = dm.T @ z
        grads["b_mlp"] = dm.sum(axis=0)
        dz = np.matmul(dm, p.W_mlp, out=ws("dz", R, 2 * H))
        dhb = ws("dhb", R, H)
        dhb[pk.to_backward] = dz[:, H:]
        dx, dx_backward = ws("dx", R, H), ws("dx_b", R, H)
        for d, (dh, out, W, b) in enumerate(((dz[:, :H], dx, "Wf", "bf"), (dhb, dx_backward, "Wb", "bb"))):
            grads[W] = ws(f"d{W}", 4 * H, 2 * H)
            grads[b] = _lstm_backward(pk, runs[d], dh, ws(f"dg{d}", R, 4 * H), grads[W], out, ws)
        dx += _take(dx_backward, pk.to_backward, ws("tmp", R, H))
        grads["E"] = pk.embedding_grad(dx, ws)
        return loss, grads


MODELS = {"treelstm": TreeLSTM, "bilstm": BiLSTM}


# optimizers: update numpy Params in place from the gradients of one step

class SGD:
    """p -= lr * g; embedding rows only where touched."""

    def __init__(self, params, lr):
        self.params, self.lr = params, lr

    def update(self, grads):
        for name, g in grads.items():
            p = getattr(self.params, name)
            if isinstance(g, SparseRows):
                p[g.rows] -= self.lr * g.values
            else:
                g *= self.lr
                p -= g


class Adagrad:
    """G += g²; p -= lr g / (√G + eps), as torch.optim.Adagrad (eps=1e-10, no decay). On an
    embedding table only the touched rows change, which equals the dense update (a zero
    gradient changes neither G nor p)."""

    def __init__(self, params, lr, eps=1e-10):
        self.params, self.lr, self.eps = params, lr, eps
        self.sums = {name: np.zeros_like(v) for name, v in params.items()}
        self.ws = Workspace(params.E.dtype)

    def update(self, grads):
        for name, g in grads.items():
            p, G = getattr(self.params, name), self.sums[name]
            if isinstance(g, SparseRows):
                rows, g = g.rows, g.values
                Gr = G[rows] + g * g
                G[rows] = Gr
                np.sqrt(Gr, out=Gr)
                Gr += self.eps
                p[rows] -= self.lr * g / Gr
            else:
                tmp = np.multiply(g, g, out=self.ws("tmp", *g.shape))
                G += tmp
                np.sqrt(G, out=tmp)
                tmp += self.eps
                g *= self.lr
                g /= tmp
                p -= g


OPTIMIZERS = {"sgd": SGD, "adagrad": Adagrad}


def make_step(name, params, optimizer="sgd", lr=0.05):
    """`step(instances) -> loss`: one training step on the summed loss of the instances,
    updating `params` (numpy Params) in place."""
    model = MODELS[name](params.E.dtype)
    opt = OPTIMIZERS[optimizer](params, lr)

    def step(instances):
        loss, grads = model(params, instances)
        opt.update(grads)
        return loss

    return step


def loss_and_grads(name, params, instances):
    """(summed loss, {parameter name: dense gradient}) without updating anything."""
    loss, grads = MODELS[name](params.E.dtype)(params, instances)
    return loss, {k: g.dense(getattr(params, k).shape) if isinstance(g, SparseRows) else g
                  for k, g in grads.items()}
