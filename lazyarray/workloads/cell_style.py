"""The same models written with ``la.cell``: one recorded node per tree node, LSTM step or
lattice cell, instead of ~20 ops. Both styles are supported and compute the same numbers."""
import lazyarray as la

from . import chains, parser
from .cells import lstm_cell, nll, zero_state
from .chains import tagger_loss, token_loss
from .lattices import lattice_loss, latticegru_char, latticegru_word, latticelstm_char, latticelstm_word
from .params import Params
from .trees import (mvrnn_internal, mvrnn_matrix, node_type, treefc_internal, treefc_root, treegru_internal,
                    treegru_leaf, treelstm_internal, treelstm_leaf)


def _output(p, h, label):
    return nll(p.W_out @ h + p.b_out, label)


# Trees: a node's state and the loss of its whole subtree, in one cell call

@la.cell
def treelstm_leaf_node(p, word, label):
    h, c = treelstm_leaf(p, p.E[word])
    return h, c, _output(p, h, label)


@la.cell
def treelstm_internal_node(p, hl, cl, ll, hr, cr, lr, label):
    h, c = treelstm_internal(p, hl, cl, hr, cr)
    return h, c, ll + lr + _output(p, h, label)


def _subtree(p, tree, leaf, internal, weights=lambda node: ()):
    """The root's outputs, the last the loss summed over the whole tree, one cell call per
    node (``weights(node)``: the internal cell's arguments that pick its parameters)."""
    def encode(node):
        if node.is_leaf:
            return leaf(p, node.word, node.label)
        return internal(p, *weights(node), *encode(node.left), *encode(node.right), node.label)
    return encode(tree.root)


def _subtree_loss(p, tree, leaf, internal, weights=lambda node: ()):
    return _subtree(p, tree, leaf, internal, weights)[-1]


def treelstm_root(p, tree):
    """(h, c, loss) of the root: its state and the loss summed over the tree."""
    return _subtree(p, tree, treelstm_leaf_node, treelstm_internal_node)


def treelstm_loss(p, tree):
    return treelstm_root(p, tree)[-1]


@la.cell
def treegru_leaf_node(p, word, label):
    h = treegru_leaf(p, p.E[word])
    return h, _output(p, h, label)


@la.cell
def treegru_internal_node(p, hl, ll, hr, lr, label):
    h = treegru_internal(p, hl, hr)
    return h, ll + lr + _output(p, h, label)


def treegru_loss(p, tree):
    return _subtree_loss(p, tree, treegru_leaf_node, treegru_internal_node)


# TreeLSTM-2Type: the internal cell takes its node's weights, so each set is a cell type of its own

@la.cell
def treelstm2type_internal_node(p, U, b, hl, cl, ll, hr, cr, lr, label):
    h, c = treelstm_internal(Params(U=U, b=b), hl, cl, hr, cr)
    return h, c, ll + lr + _output(p, h, label)


def treelstm2type_loss(p, tree):
    kinds = ((p.U0, p.b0), (p.U1, p.b1))
    return _subtree_loss(p, tree, treelstm_leaf_node, treelstm2type_internal_node,
                         lambda node: kinds[node_type(tree.index, node.index)])


# MV-RNN: a vector and a matrix per node

@la.cell
def mvrnn_leaf_node(p, word, matrix, label):
    """``mvrnn_leaf`` with its matrix's row picked outside: a cell's body may index with an
    integer argument but not compute with it."""
    a, A = p.E[word], p.M[matrix]
    return a, A, _output(p, a, label)


@la.cell
def mvrnn_internal_node(p, al, Al, ll, ar, Ar, lr, label):
    a, A = mvrnn_internal(p, al, Al, ar, Ar)
    return a, A, ll + lr + _output(p, a, label)


def mvrnn_loss(p, tree):
    def leaf(p, word, label):
        return mvrnn_leaf_node(p, word, mvrnn_matrix(p, word), label)
    return _subtree_loss(p, tree, leaf, mvrnn_internal_node)


# Tree-FC: one cell per internal node (a product, its bias and a relu)

treefc_node = la.cell(treefc_internal)


def treefc_root_cells(p, tree):
    return treefc_root(p, tree, treefc_node)


# BiLSTM taggers: an LSTM step and a token's output are cells

lstm_step = la.cell(lstm_cell)
tag_loss = la.cell(token_loss)


def bilstm_loss(p, sentence):
    return tagger_loss(p, [p.E[w] for w in sentence.words], sentence.tags, lstm_step, tag_loss)


def chartagger_loss(p, sentence):
    return chains.chartagger_loss(p, sentence, lstm_step, tag_loss)


# Transition parser: an LSTM step, the scorer and a hinge term are cells; the stack and its
# decisions stay plain Python between them

score = la.cell(chains.mlp_output)
hinge = la.cell(parser.hinge)


def parser_parse(p, sentence):
    return parser.parse(p, sentence, lstm_step, score, hinge)


def parser_loss(p, sentence):
    return parser_parse(p, sentence)[1]


# LatticeLSTM: character and word cells

lattice_char = la.cell(latticelstm_char)
lattice_word = la.cell(latticelstm_word)


def latticelstm_loss(p, lattice):
    H = p.b_l.shape[0]
    return lattice_loss(p, lattice, lattice_char, lattice_word, (zero_state(H), zero_state(H)))


# LatticeGRU: the same lattice with GRU cells

lattice_gru_char = la.cell(latticegru_char)
lattice_gru_word = la.cell(latticegru_word)


def latticegru_loss(p, lattice):
    return lattice_loss(p, lattice, lattice_gru_char, lattice_gru_word, (zero_state(p.b_h.shape[0]),))
