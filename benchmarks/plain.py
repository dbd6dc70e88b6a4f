"""Plain numpy, one instance at a time: each reference workload as a user writes it without
lazyarray (recursion over the tree, a Python loop over the sentence, ``np.tanh``, ``W @ x + b``),
nothing batched across instances. The eager mode's target (issue 24) is measured against it:
the code is the workload's own, op for op (``np.split`` where the model calls ``la.split``), so
the ratio is what lazyarray's eager wrapper costs. ``PLAIN[name](numpy_params, instances)``
computes what ``WORKLOADS[name].scope_loss`` computes for the same instances."""
import numpy as np

from lazyarray.workloads.chains import run_lstm
from lazyarray.workloads.lattices import lattice_walk
from lazyarray.workloads.parser import Configuration, margin_pair
from lazyarray.workloads.trees import mvrnn_matrix, node_type

from .hand_ops import sigmoid

__all__ = ["PLAIN"]


def _nll(logits, label):
    """-log_softmax(logits)[label]."""
    shifted = logits - logits.max()
    return np.log(np.exp(shifted).sum()) - shifted[label]


def _lstm(W, b, x, h, c):
    i, f, o, u = np.split(W @ np.concatenate([x, h]) + b, 4)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(u)
    return sigmoid(o) * np.tanh(c), c


def _gru(W_g, b_g, W_h, b_h, x, h):
    z, r = np.split(sigmoid(W_g @ np.concatenate([x, h]) + b_g), 2)
    return (1 - z) * h + z * np.tanh(W_h @ np.concatenate([x, r * h]) + b_h)


def _run_lstm(W, b, xs, h=None, c=None):
    if h is None:
        h = c = np.zeros(b.shape[0] // 4, np.float32)
    return run_lstm(W, b, xs, h, c, step=_lstm)


def _mlp(p, h):
    return p.W_out @ np.tanh(p.W_mlp @ h + p.b_mlp) + p.b_out


def _each(model):
    """The scope result from a per-instance model: the sum of its results."""
    return lambda p, instances: sum(model(p, x) for x in instances)


# Trees

def _tree_loss(p, tree, leaf, internal):
    losses = []

    def encode(node):
        state = leaf(node) if node.is_leaf else internal(node, encode(node.left), encode(node.right))
        h = state[0] if isinstance(state, tuple) else state
        losses.append(_nll(p.W_out @ h + p.b_out, node.label))
        return state

    encode(tree.root)
    return sum(losses)


def _treelstm_leaf(p, node):
    i, o, u = np.split(p.W_leaf @ p.E[node.word] + p.b_leaf, 3)
    c = sigmoid(i) * np.tanh(u)
    return sigmoid(o) * np.tanh(c), c


def _treelstm_internal(U, b, left, right):
    (hl, cl), (hr, cr) = left, right
    i, fl, fr, o, u = np.split(U @ np.concatenate([hl, hr]) + b, 5)
    c = sigmoid(i) * np.tanh(u) + sigmoid(fl) * cl + sigmoid(fr) * cr
    return sigmoid(o) * np.tanh(c), c


def treelstm(p, tree):
    return _tree_loss(p, tree, lambda node: _treelstm_leaf(p, node),
                      lambda node, l, r: _treelstm_internal(p.U, p.b, l, r))


def treelstm2type(p, tree):
    kinds = ((p.U0, p.b0), (p.U1, p.b1))
    return _tree_loss(p, tree, lambda node: _treelstm_leaf(p, node),
                      lambda node, l, r: _treelstm_internal(*kinds[node_type(tree.index, node.index)], l, r))


def treegru(p, tree):
    def internal(node, hl, hr):
        z, rl, rr = np.split(sigmoid(p.U_g @ np.concatenate([hl, hr]) + p.b_g), 3)
        h_new = np.tanh(p.U_h @ np.concatenate([rl * hl, rr * hr]) + p.b_h)
        return z * (hl + hr) / 2 + (1 - z) * h_new

    return _tree_loss(p, tree, lambda node: np.tanh(p.W_leaf @ p.E[node.word] + p.b_leaf), internal)


def mvrnn(p, tree):
    def internal(node, left, right):
        (al, Al), (ar, Ar) = left, right
        a = np.tanh(p.W @ np.concatenate([Ar @ al, Al @ ar]) + p.b)
        return a, p.W_M @ np.concatenate([Al, Ar])

    return _tree_loss(p, tree, lambda node: (p.E[node.word], p.M[mvrnn_matrix(p, node.word)]), internal)


def treefc(p, tree):
    def encode(node):
        if node.is_leaf:
            return p.E[node.word]
        return np.maximum(p.W @ np.concatenate([encode(node.left), encode(node.right)]) + p.b, 0)

    return encode(tree.root)


# Chains

def _tagger(p, xs, tags):
    fwd, _ = _run_lstm(p.Wf, p.bf, xs)
    bwd, _ = _run_lstm(p.Wb, p.bb, xs[::-1])
    return sum(_nll(_mlp(p, np.concatenate([f, b])), tag) for f, b, tag in zip(fwd, bwd[::-1], tags))


def bilstm(p, sentence):
    return _tagger(p, [p.E[w] for w in sentence.words], sentence.tags)


def chartagger(p, sentence):
    xs = []
    for word, chars in zip(sentence.words, sentence.chars):
        cs = [p.C[ch] for ch in chars]
        fwd, _ = _run_lstm(p.Wcf, p.bcf, cs)
        bwd, _ = _run_lstm(p.Wcb, p.bcb, cs[::-1])
        xs.append(np.concatenate([p.E[word], fwd[-1], bwd[-1]]))
    return _tagger(p, xs, sentence.tags)


def varlstm(p, sentence):
    hs, _ = _run_lstm(p.W, p.b, [p.E[w] for w in sentence.words])
    return hs[-1]


def lstmnmt(p, sentence):
    source = list(sentence.words)
    target = source[::-1]
    enc, c = _run_lstm(p.W_enc, p.b_enc, [p.E_src[w] for w in source])
    bos = p.E_tgt.shape[0] - 1
    dec, _ = _run_lstm(p.W_dec, p.b_dec, [p.E_tgt[w] for w in [bos] + target[:-1]], enc[-1], c)
    return sum(_nll(_mlp(p, h), y) for h, y in zip(dec, target))


def parser(p, sentence):
    """The greedy parse's summed hinge loss; the transition system is the workload's own."""
    xs = [p.E[w] for w in sentence.words]
    fwd, _ = _run_lstm(p.Wf, p.bf, xs)
    bwd, _ = _run_lstm(p.Wb, p.bb, xs[::-1])
    vectors = [np.concatenate([f, b]) for f, b in zip(fwd, bwd[::-1])] + [p.root]
    config = Configuration(len(sentence))
    loss = np.float32(0)
    while not config.terminal:
        scores = _mlp(p, np.concatenate([p.pad if i is None else vectors[i] for i in config.features()]))
        legal = config.legal()
        pair = margin_pair(scores, config.costs(sentence, legal))
        if pair is not None:
            loss += max(0, 1 - scores[pair[0]] + scores[pair[1]])
        config.apply(max(legal, key=scores.__getitem__))
    return loss


# Lattices

def _lattice_loss(p, lattice, char_cell, word_cell, state):
    return sum(_nll(p.W_out @ h[0] + p.b_out, tag)
               for h, tag in lattice_walk(p, lattice, char_cell, word_cell, state))


def _latticelstm_char(p, x, h, c, *words):
    i, f, o, u = np.split(p.W_c @ np.concatenate([x, h]) + p.b_c, 4)
    if words:
        gates = sigmoid(np.stack([i] + [p.W_l @ np.concatenate([x, cw]) + p.b_l for cw in words]))
        e = np.exp(gates - gates.max(axis=0))
        c = (e / e.sum(axis=0) * np.stack([np.tanh(u), *words])).sum(axis=0)
    else:
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(u)
    return sigmoid(o) * np.tanh(c), c


def _latticelstm_word(p, x, h, c):
    i, f, u = np.split(p.W_w @ np.concatenate([x, h]) + p.b_w, 3)
    return sigmoid(f) * c + sigmoid(i) * np.tanh(u)


def _latticegru_char(p, x, h, *words):
    if words:
        h = np.mean(np.stack([h, *words]), axis=0)
    return _gru(p.W_g, p.b_g, p.W_h, p.b_h, x, h)


def _latticegru_word(p, x, h):
    return _gru(p.Ww_g, p.bw_g, p.Ww_h, p.bw_h, x, h)


def latticelstm(p, lattice):
    zero = np.zeros(p.b_l.shape[0], np.float32)
    return _lattice_loss(p, lattice, _latticelstm_char, _latticelstm_word, (zero, zero))


def latticegru(p, lattice):
    zero = np.zeros(p.b_h.shape[0], np.float32)
    return _lattice_loss(p, lattice, _latticegru_char, _latticegru_word, (zero,))


PLAIN = {name: _each(model) for name, model in (
    ("treelstm", treelstm), ("treegru", treegru), ("treelstm2type", treelstm2type), ("mvrnn", mvrnn),
    ("treefc", treefc), ("bilstm", bilstm), ("varlstm", varlstm), ("lstmnmt", lstmnmt),
    ("chartagger", chartagger), ("parser", parser), ("latticelstm", latticelstm),
    ("latticegru", latticegru))}
