"""Hand-batched numpy tree models: level by level over all trees of a scope (all leaves in one
batch, then internal nodes grouped by height), outputs and losses of all nodes in one batch."""
import numpy as np

from lazyarray.workloads.trees import mvrnn_matrix, node_type

from .hand_ops import nll_sum, sigmoid


class Forest:
    """The nodes of several trees in one index space; `levels[k]` are the nodes of height k."""

    def __init__(self, trees):
        sizes = [len(t) for t in trees]
        offset = np.repeat(np.cumsum([0] + sizes[:-1]), sizes)
        self.words = np.concatenate([t.words for t in trees])
        self.labels = np.concatenate([t.labels for t in trees])
        self.left = np.concatenate([t.left for t in trees]) + offset
        self.right = np.concatenate([t.right for t in trees]) + offset
        height = np.concatenate([t.height for t in trees])
        order = np.argsort(height, kind="stable")
        self.levels = np.split(order, np.flatnonzero(np.diff(height[order])) + 1)
        self.tree_index = np.repeat(np.array([t.index for t in trees], np.uint64), sizes)
        self.node_index = (np.arange(len(offset)) - offset).astype(np.uint64)

    def __len__(self):
        return len(self.words)


def _outputs(p, f, h):
    return nll_sum(h @ p.W_out.T + p.b_out, f.labels)


def _lstm_internal(U, b, h, c, f, idx):
    l, r = f.left[idx], f.right[idx]
    i, fl, fr, o, u = np.split(np.concatenate([h[l], h[r]], axis=1) @ U.T + b, 5, axis=1)
    c[idx] = sigmoid(i) * np.tanh(u) + sigmoid(fl) * c[l] + sigmoid(fr) * c[r]
    h[idx] = sigmoid(o) * np.tanh(c[idx])


def _lstm_leaves(p, f):
    h = np.empty((len(f), p.E.shape[1]), np.float32)
    c = np.empty_like(h)
    leaves = f.levels[0]
    i, o, u = np.split(p.E[f.words[leaves]] @ p.W_leaf.T + p.b_leaf, 3, axis=1)
    c[leaves] = sigmoid(i) * np.tanh(u)
    h[leaves] = sigmoid(o) * np.tanh(c[leaves])
    return h, c


def treelstm(p, trees):
    f = Forest(trees)
    h, c = _lstm_leaves(p, f)
    for idx in f.levels[1:]:
        _lstm_internal(p.U, p.b, h, c, f, idx)
    return _outputs(p, f, h)


def treelstm2type(p, trees):
    """Each level runs as two batches, one per parameter set."""
    f = Forest(trees)
    kind = node_type(f.tree_index, f.node_index)
    h, c = _lstm_leaves(p, f)
    for idx in f.levels[1:]:
        k = kind[idx]
        _lstm_internal(p.U0, p.b0, h, c, f, idx[k == 0])
        _lstm_internal(p.U1, p.b1, h, c, f, idx[k == 1])
    return _outputs(p, f, h)


def treegru(p, trees):
    f = Forest(trees)
    h = np.empty((len(f), p.E.shape[1]), np.float32)
    leaves = f.levels[0]
    h[leaves] = np.tanh(p.E[f.words[leaves]] @ p.W_leaf.T + p.b_leaf)
    for idx in f.levels[1:]:
        hl, hr = h[f.left[idx]], h[f.right[idx]]
        z, rl, rr = np.split(sigmoid(np.concatenate([hl, hr], axis=1) @ p.U_g.T + p.b_g), 3, axis=1)
        h_new = np.tanh(np.concatenate([rl * hl, rr * hr], axis=1) @ p.U_h.T + p.b_h)
        h[idx] = z * (hl + hr) / 2 + (1 - z) * h_new
    return _outputs(p, f, h)


def mvrnn(p, trees):
    f = Forest(trees)
    H = p.E.shape[1]
    a = np.empty((len(f), H), np.float32)
    A = np.empty((len(f), H, H), np.float32)
    leaves = f.levels[0]
    a[leaves] = p.E[f.words[leaves]]
    A[leaves] = p.M[mvrnn_matrix(p, f.words[leaves])]
    for idx in f.levels[1:]:
        l, r = f.left[idx], f.right[idx]
        mixed = np.concatenate([A[r] @ a[l, :, None], A[l] @ a[r, :, None]], axis=1)[:, :, 0]
        a[idx] = np.tanh(mixed @ p.W.T + p.b)
        A[idx] = p.W_M @ np.concatenate([A[l], A[r]], axis=1)
    return _outputs(p, f, a)


def treefc(p, trees):
    """Complete trees of one size: the leaves left to right, then siblings are adjacent rows at
    every level, so each level is one reshape and one matmul (no gathers)."""
    if len({len(t) for t in trees}) > 1:
        raise ValueError("hand-batched Tree-FC needs complete trees of one size")
    h = p.E[np.concatenate([t.leaf_words for t in trees])]
    while len(h) > len(trees):
        h = np.maximum(h.reshape(len(h) // 2, -1) @ p.W.T + p.b, 0)
    return h.sum(axis=0)
