"""Stanford Sentiment Treebank trees: parsing, the vocabulary, and the leaf sequences.

A tree is kept twice: as linked `Node`s, which per-instance model code recurses over the way a
user would, and as flat post-order arrays, which hand-batched code turns into index arrays.
"""
import functools
import gzip
import re
from importlib import resources

import numpy as np

SPLITS = ("train", "dev", "test")  # bundled (train compressed); the lexicon comes from train (lattices.py)
# ASCII whitespace separates tokens: train.txt has words with a no-break space inside ("8\xa01\\/2")
_TOKEN = re.compile(r"\(|\)|[^\s()]+", re.ASCII)
_LEAF = re.compile(r"\(\d+ ([^()\s]+)\)", re.ASCII)


class Node:
    """One tree node; `word` is a vocabulary id for a leaf, -1 for an internal node."""

    __slots__ = ("index", "label", "word", "left", "right")

    def __init__(self, index, label, word=-1, left=None, right=None):
        self.index, self.label, self.word, self.left, self.right = index, label, word, left, right

    @property
    def is_leaf(self):
        return self.left is None


class Tree:
    """A binary tree; node i of the post-order (children before parents, root last) has
    `words[i]` (-1 if internal), `labels[i]`, children `left[i]`, `right[i]` (-1 for a leaf)
    and `height[i]` (0 for a leaf): the level at which level-by-level batching computes it."""

    __slots__ = ("index", "root", "words", "labels", "left", "right", "height", "tokens")

    def __init__(self, index, words, labels, left, right, tokens=()):
        self.index, self.tokens = index, tuple(tokens)
        self.words, self.labels = np.asarray(words, np.int64), np.asarray(labels, np.int64)
        self.left, self.right = np.asarray(left, np.int64), np.asarray(right, np.int64)
        height, nodes = [0] * len(words), []
        for i, (w, y, l, r) in enumerate(zip(words, labels, left, right)):
            if l < 0:
                nodes.append(Node(i, int(y), int(w)))
            else:
                height[i] = 1 + max(height[l], height[r])
                nodes.append(Node(i, int(y), -1, nodes[l], nodes[r]))
        self.height = np.asarray(height, np.int64)
        self.root = nodes[-1]

    def __len__(self):
        return len(self.words)

    @property
    def leaf_words(self):
        """Word ids left to right (post-order visits leaves in sentence order)."""
        return self.words[self.words >= 0]

    @property
    def leaf_labels(self):
        return self.labels[self.words >= 0]


def parse(line, vocab, index=0):
    """One PTB bracketed line `(label (label word) (label word))` -> Tree; unknown words -> 0."""
    words, labels, left, right, tokens = [], [], [], [], []
    stack = []  # per open bracket: [label, child post-order indices...]
    toks = _TOKEN.findall(line)
    k = 0
    while k < len(toks):
        t = toks[k]
        if t == "(":
            stack.append([int(toks[k + 1])])
            k += 2
            continue
        if t == ")":
            label, *children = stack.pop()
            if len(children) == 1 and isinstance(children[0], str):
                words.append(vocab.get(children[0], 0))
                tokens.append(children[0])
                left.append(-1), right.append(-1)
            elif len(children) == 2:
                words.append(-1)
                left.append(children[0]), right.append(children[1])
            else:
                raise ValueError(f"tree {index}: node with {len(children)} children in {line!r}")
            labels.append(label)
            if stack:
                stack[-1].append(len(words) - 1)
        else:
            stack[-1].append(t)
        k += 1
    if stack or not words:
        raise ValueError(f"tree {index}: unbalanced brackets in {line!r}")
    return Tree(index, words, labels, left, right, tokens)


def leaf_tokens(line):
    """The words of one bracketed tree line, in sentence order."""
    return _LEAF.findall(line)


@functools.cache
def _lines(split):
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not bundled; choose from {SPLITS}")
    data = resources.files(__package__).joinpath("data")
    if split == "train":
        return tuple(gzip.decompress(data.joinpath("sst_train.txt.gz").read_bytes()).decode("utf-8").splitlines())
    return tuple(data.joinpath(f"sst_{split}.txt").read_text("utf-8").splitlines())


@functools.cache
def vocabulary():
    """Word -> id over the bundled trees, sorted so that ids never depend on file order; 0 is
    reserved for unknown words."""
    words = {w for split in SPLITS for line in _lines(split) for w in leaf_tokens(line)}
    return {w: i for i, w in enumerate(sorted(words), start=1)}


@functools.cache
def _load(split):
    vocab = vocabulary()
    return tuple(parse(line, vocab, i) for i, line in enumerate(_lines(split)))


def load_sst(split="test"):
    """All trees of a bundled split (parsed once per process)."""
    return list(_load(split))


def sample(items, n, seed=0):
    """n items drawn without replacement in a seeded order (cycling when n > len(items)), so
    that a benchmark of n instances sees the same mix of sizes on every run."""
    order = np.random.default_rng(seed).permutation(len(items))
    return [items[order[k % len(items)]] for k in range(n)]


class Sentence:
    """A tree's leaf sequence: word ids and their sentiment labels as tags (tuples of ints)."""

    __slots__ = ("index", "words", "tags")

    def __init__(self, index, words, tags):
        self.index, self.words, self.tags = index, words, tags

    def __len__(self):
        return len(self.words)


def sentences(trees):
    return [Sentence(t.index, tuple(t.leaf_words.tolist()), tuple(t.leaf_labels.tolist())) for t in trees]
