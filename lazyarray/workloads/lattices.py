"""Character lattices over SST sentences, and the LatticeLSTM and LatticeGRU models.

A sentence's words joined by spaces give a chain of characters; every lexicon word found in the
text (any substring, as in a Chinese lattice) adds a word cell that reads the character state at
its first character s and feeds the character cell at its last character e-1. Each character is
tagged with the sentiment label of its word (spaces are neutral), as in NER tagging.
"""
import collections
import functools
from importlib import resources

import lazyarray as la

from .params import init
from .cells import gru_cell, nll, zero_state
from .sst import leaf_tokens
from .trees import CLASSES

ALPHABET = "".join(chr(c) for c in range(32, 127))  # printable ASCII; anything else is id 0
CHAR_IDS = {ch: i for i, ch in enumerate(ALPHABET, start=1)}
NEUTRAL = 2
MIN_LENGTH, MAX_LENGTH, MIN_COUNT = 2, 6, 5


def derive_lexicon(tree_lines):
    """Every word of MIN_LENGTH to MAX_LENGTH characters occurring at least MIN_COUNT times."""
    counts = collections.Counter(w for line in tree_lines for w in leaf_tokens(line))
    return sorted(w for w, n in counts.items() if MIN_LENGTH <= len(w) <= MAX_LENGTH and n >= MIN_COUNT)


@functools.cache
def lexicon():
    """The bundled lexicon, derived once from SST train.txt; a word's id is its position."""
    text = resources.files(__package__).joinpath("data/lexicon.txt").read_text("utf-8")
    return tuple(text.split())


@functools.cache
def _lexicon_ids():
    return {w: i for i, w in enumerate(lexicon())}


class Lattice:
    """`chars`, `tags`: one entry per character; `words`: (start, end, lexicon id) for each
    match of text[start:end], sorted by start then end."""

    __slots__ = ("index", "text", "chars", "tags", "words")

    def __init__(self, index, text, chars, tags, words):
        self.index, self.text, self.chars, self.tags, self.words = index, text, chars, tags, words

    def __len__(self):
        return len(self.chars)


def build_lattice(tree):
    text = " ".join(tree.tokens)
    tags = []
    for k, (token, label) in enumerate(zip(tree.tokens, tree.leaf_labels.tolist())):
        tags += [NEUTRAL] * (k > 0) + [label] * len(token)
    ids = _lexicon_ids()
    words = tuple((s, s + n, ids[text[s:s + n]]) for s in range(len(text))
                  for n in range(MIN_LENGTH, MAX_LENGTH + 1)
                  if s + n <= len(text) and text[s:s + n] in ids)
    return Lattice(tree.index, text, tuple(CHAR_IDS.get(ch, 0) for ch in text), tuple(tags), words)


def lattices(trees):
    return [build_lattice(t) for t in trees]


def lattice_walk(p, lattice, char_cell, word_cell, state):
    """(state, tag) per character. Characters run left to right from `state` (a tuple, h
    first) via `char_cell(p, x, *state, *incoming word outputs)`; right after character s, the
    words starting at s run `word_cell(p, x_word, *state at s)`. Works on any array module's
    values (benchmarks.plain walks numpy arrays with it)."""
    incoming = [[] for _ in lattice.chars]
    starting = [[] for _ in lattice.chars]
    for s, e, w in lattice.words:
        starting[s].append((e, w))
    for j, (ch, tag) in enumerate(zip(lattice.chars, lattice.tags)):
        state = char_cell(p, p.C[ch], *state, *incoming[j])
        if not isinstance(state, tuple):
            state = (state,)
        for e, w in starting[j]:
            incoming[e - 1].append(word_cell(p, p.E_w[w], *state))
        yield state, tag


def lattice_loss(p, lattice, char_cell, word_cell, state):
    """Sum of the per-character losses of `lattice_walk`."""
    return la.sum(la.stack([nll(p.W_out @ h[0] + p.b_out, tag)
                            for h, tag in lattice_walk(p, lattice, char_cell, word_cell, state)]))


# LatticeLSTM (Zhang & Yang 2018)

def latticelstm_params(H, seed=0):
    return init(seed, C=(len(ALPHABET) + 1, H), E_w=(len(lexicon()), H), W_c=(4 * H, 2 * H),
                  b_c=(4 * H,), W_w=(3 * H, 2 * H), b_w=(3 * H,), W_l=(H, 2 * H), b_l=(H,),
                  W_out=(CLASSES, H), b_out=(CLASSES,))


def latticelstm_char(p, x, h, c, *words):
    """An LSTM character cell; where words end here, their cells and the candidate are mixed
    with gates normalised together (softmax over σ(i), σ(W_l [x; c_w] + b_l), ...), which
    replaces the forget path."""
    i, f, o, u = la.split(p.W_c @ la.concatenate([x, h]) + p.b_c, 4)
    if words:
        gates = la.sigmoid(la.stack([i] + [p.W_l @ la.concatenate([x, cw]) + p.b_l for cw in words]))
        c = la.sum(la.softmax(gates, axis=0) * la.stack([la.tanh(u), *words]), axis=0)
    else:
        c = la.sigmoid(f) * c + la.sigmoid(i) * la.tanh(u)
    return la.sigmoid(o) * la.tanh(c), c


def latticelstm_word(p, x, h, c):
    i, f, u = la.split(p.W_w @ la.concatenate([x, h]) + p.b_w, 3)
    return la.sigmoid(f) * c + la.sigmoid(i) * la.tanh(u)


def latticelstm_loss(p, lattice):
    H = p.b_l.shape[0]
    return lattice_loss(p, lattice, latticelstm_char, latticelstm_word, (zero_state(H), zero_state(H)))


# LatticeGRU (Su et al. 2017)

def latticegru_params(H, seed=0):
    return init(seed, C=(len(ALPHABET) + 1, H), E_w=(len(lexicon()), H), W_g=(2 * H, 2 * H),
                  b_g=(2 * H,), W_h=(H, 2 * H), b_h=(H,), Ww_g=(2 * H, 2 * H), bw_g=(2 * H,),
                  Ww_h=(H, 2 * H), bw_h=(H,), W_out=(CLASSES, H), b_out=(CLASSES,))


def latticegru_char(p, x, h, *words):
    """A GRU character cell whose previous state is averaged with the words ending here."""
    if words:
        h = la.mean(la.stack([h, *words]), axis=0)
    return gru_cell(p.W_g, p.b_g, p.W_h, p.b_h, x, h)


def latticegru_word(p, x, h):
    return gru_cell(p.Ww_g, p.bw_g, p.Ww_h, p.bw_h, x, h)


def latticegru_loss(p, lattice):
    return lattice_loss(p, lattice, latticegru_char, latticegru_word, (zero_state(p.b_h.shape[0]),))
