"""Tree models: TreeLSTM, TreeGRU, TreeLSTM-2Type and MV-RNN over SST trees, with an output
and a loss at every node; Tree-FC over synthetic complete binary trees.

Per-node functions (`treelstm_leaf`, `treelstm_internal`, ...) take the params first and
LazyArrays after, so that each can become one batching unit with `la.cell`.
"""
import numpy as np

import lazyarray as la

from .params import Params, init
from .cells import nll
from .sst import Tree

CLASSES = 5


def tree_loss(p, tree, leaf, internal):
    """Sum over the nodes of -log_softmax(W_out h + b_out)[label], encoding bottom-up with
    `leaf(node)` and `internal(node, left_state, right_state)`; a state is h or (h, ...)."""
    losses = []

    def encode(node):
        if node.is_leaf:
            state = leaf(node)
        else:
            state = internal(node, encode(node.left), encode(node.right))
        h = state[0] if isinstance(state, tuple) else state
        losses.append(nll(p.W_out @ h + p.b_out, node.label))
        return state

    encode(tree.root)
    return la.sum(la.stack(losses))


# TreeLSTM (binary N-ary Tree-LSTM, Tai et al. 2015)

def treelstm_params(H, vocab, seed=0):
    return init(seed, E=(vocab, H), W_leaf=(3 * H, H), b_leaf=(3 * H,), U=(5 * H, 2 * H),
                  b=(5 * H,), W_out=(CLASSES, H), b_out=(CLASSES,))


def treelstm_leaf(p, x):
    i, o, u = la.split(p.W_leaf @ x + p.b_leaf, 3)
    c = la.sigmoid(i) * la.tanh(u)
    return la.sigmoid(o) * la.tanh(c), c


def treelstm_internal(p, hl, cl, hr, cr):
    i, fl, fr, o, u = la.split(p.U @ la.concatenate([hl, hr]) + p.b, 5)
    c = la.sigmoid(i) * la.tanh(u) + la.sigmoid(fl) * cl + la.sigmoid(fr) * cr
    return la.sigmoid(o) * la.tanh(c), c


def treelstm_loss(p, tree):
    return tree_loss(p, tree, lambda node: treelstm_leaf(p, p.E[node.word]),
                     lambda node, l, r: treelstm_internal(p, *l, *r))


# TreeLSTM-2Type: each internal node uses one of two parameter sets

TYPE_SEED = 0
_MASK = (1 << 64) - 1


def node_type(tree_index, node_index, seed=TYPE_SEED):
    """0 or 1, each with probability 1/2: splitmix64 of (seed, tree, node). Works elementwise on
    uint64 arrays too, which hand-batched code uses."""
    x = ((tree_index << 32) + node_index + seed * 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return (x ^ (x >> 31)) & 1


def treelstm2type_params(H, vocab, seed=0):
    return init(seed, E=(vocab, H), W_leaf=(3 * H, H), b_leaf=(3 * H,), U0=(5 * H, 2 * H),
                  b0=(5 * H,), U1=(5 * H, 2 * H), b1=(5 * H,), W_out=(CLASSES, H),
                  b_out=(CLASSES,))


def treelstm2type_loss(p, tree):
    kinds = (Params(U=p.U0, b=p.b0), Params(U=p.U1, b=p.b1))
    return tree_loss(
        p, tree, lambda node: treelstm_leaf(p, p.E[node.word]),
        lambda node, l, r: treelstm_internal(kinds[node_type(tree.index, node.index)], *l, *r))


# TreeGRU (binary N-ary Tree-GRU)

def treegru_params(H, vocab, seed=0):
    return init(seed, E=(vocab, H), W_leaf=(H, H), b_leaf=(H,), U_g=(3 * H, 2 * H),
                  b_g=(3 * H,), U_h=(H, 2 * H), b_h=(H,), W_out=(CLASSES, H), b_out=(CLASSES,))


def treegru_leaf(p, x):
    return la.tanh(p.W_leaf @ x + p.b_leaf)


def treegru_internal(p, hl, hr):
    z, rl, rr = la.split(la.sigmoid(p.U_g @ la.concatenate([hl, hr]) + p.b_g), 3)
    h_new = la.tanh(p.U_h @ la.concatenate([rl * hl, rr * hr]) + p.b_h)
    return z * (hl + hr) / 2 + (1 - z) * h_new


def treegru_loss(p, tree):
    return tree_loss(p, tree, lambda node: treegru_leaf(p, p.E[node.word]),
                     lambda node, l, r: treegru_internal(p, l, r))


# MV-RNN (Socher et al. 2012): a vector and a matrix at every node

MATRIX_BUCKETS = 1000


def mvrnn_params(H, vocab, seed=0):
    """Word matrices start near the identity and W_M near [I I] / 2 (as in the paper), so that
    products of matrices along a path neither vanish nor explode."""
    p = init(seed, E=(vocab, H), M=(min(vocab, MATRIX_BUCKETS), H, H), W=(H, 2 * H), b=(H,),
               W_M=(H, 2 * H), W_out=(CLASSES, H), b_out=(CLASSES,))
    eye = np.eye(H, dtype=np.float32)
    p.M += eye
    p.W_M += np.hstack([eye, eye]) / 2
    return p


def mvrnn_matrix(p, word):
    """The word's matrix: words share MATRIX_BUCKETS matrices."""
    return word % p.M.shape[0]


def mvrnn_leaf(p, word):
    return p.E[word], p.M[mvrnn_matrix(p, word)]


def mvrnn_internal(p, al, Al, ar, Ar):
    a = la.tanh(p.W @ la.concatenate([Ar @ al, Al @ ar]) + p.b)
    return a, p.W_M @ la.concatenate([Al, Ar])


def mvrnn_loss(p, tree):
    return tree_loss(p, tree, lambda node: mvrnn_leaf(p, node.word),
                     lambda node, l, r: mvrnn_internal(p, *l, *r))


# Tree-FC (Cavs): complete binary trees, one fully connected layer per internal node

def complete_trees(n, k=5, vocab=1000, seed=0):
    """n complete binary trees with 2**k leaves each, random words in 1..vocab-1."""
    rng = np.random.default_rng(seed)
    return [complete_tree(i, rng.integers(1, vocab, 2 ** k).tolist()) for i in range(n)]


def complete_tree(index, leaf_words):
    words, left, right = [], [], []

    def build(lo, hi):
        if hi - lo == 1:
            words.append(leaf_words[lo]), left.append(-1), right.append(-1)
        else:
            mid = (lo + hi) // 2
            l, r = build(lo, mid), build(mid, hi)
            words.append(-1), left.append(l), right.append(r)
        return len(words) - 1

    build(0, len(leaf_words))
    return Tree(index, words, [0] * len(words), left, right)


def treefc_params(H, vocab, seed=0):
    return init(seed, E=(vocab, H), W=(H, 2 * H), b=(H,))


def treefc_internal(p, hl, hr):
    return la.relu(p.W @ la.concatenate([hl, hr]) + p.b)


def treefc_root(p, tree, internal=treefc_internal):
    """The root vector; a scope's result is the sum of its trees' roots."""
    def encode(node):
        if node.is_leaf:
            return p.E[node.word]
        return internal(p, encode(node.left), encode(node.right))

    return encode(tree.root)
