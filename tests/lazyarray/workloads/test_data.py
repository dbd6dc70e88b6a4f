from pathlib import Path

import numpy as np
import pytest

from lazyarray.workloads import load_sst, sample, sentences, vocabulary, vocab_size
from lazyarray.workloads.lattices import ALPHABET, NEUTRAL, derive_lexicon, lattices, lexicon
from lazyarray.workloads.sst import _lines, parse
from lazyarray.workloads.trees import complete_trees, node_type

TRAIN = Path(__file__).parents[3] / ".." / "shared" / "data" / "sst" / "train.txt"


def to_ptb(tree):
    tokens = iter(tree.tokens)

    def fmt(node):
        if node.is_leaf:
            return f"({node.label} {next(tokens)})"
        return f"({node.label} {fmt(node.left)} {fmt(node.right)})"

    return fmt(tree.root)


@pytest.mark.parametrize("split, count", [("train", 8543), ("test", 2210), ("dev", 1101)])
def test_sst_counts_and_round_trip(split, count):
    """Train's lines include words with a no-break space inside (a token, not two)."""
    trees = load_sst(split)
    assert len(trees) == count
    assert [to_ptb(t) for t in trees] == list(_lines(split))


def test_tree_arrays_match_nodes():
    vocab = vocabulary()
    tree = parse("(3 (2 (2 a) (3 good)) (2 .))", vocab, index=7)
    assert tree.index == 7 and len(tree) == 5 and tree.tokens == ("a", "good", ".")
    assert tree.words.tolist() == [vocab["a"], vocab["good"], -1, vocab["."], -1]
    assert tree.left.tolist() == [-1, -1, 0, -1, 2] and tree.right.tolist() == [-1, -1, 1, -1, 3]
    assert tree.height.tolist() == [0, 0, 1, 0, 2] and tree.labels.tolist() == [2, 3, 2, 2, 3]
    root = tree.root
    assert (root.index, root.label, root.left.index, root.right.word) == (4, 3, 2, vocab["."])
    assert parse("(1 unseen-word)", vocab).words.tolist() == [0]


@pytest.mark.parametrize("line", ["(1 (2 a)", "(1 (2 a) (2 b) (2 c))", ""])
def test_bad_tree_is_rejected(line):
    with pytest.raises(ValueError):
        parse(line, vocabulary())


def test_vocabulary_covers_bundled_trees():
    assert min(vocabulary().values()) == 1 and vocab_size() == len(vocabulary()) + 1
    assert all((t.leaf_words > 0).all() for t in load_sst("test"))


def test_sample_and_sentences_are_seeded():
    trees = load_sst("test")
    a, b, c = sample(trees, 5, seed=3), sample(trees, 5, seed=3), sample(trees, 5, seed=4)
    assert [t.index for t in a] == [t.index for t in b] != [t.index for t in c]
    assert len(sample(trees[:2], 5)) == 5
    s = sentences(a)[0]
    assert s.words == tuple(a[0].leaf_words.tolist()) and len(s.tags) == len(s)


@pytest.mark.skipif(not TRAIN.exists(), reason=f"SST train.txt not found at {TRAIN}")
def test_bundled_lexicon_rederives_from_train():
    assert tuple(derive_lexicon(TRAIN.read_text("utf-8").splitlines())) == lexicon()


def test_lattice_builder():
    trees = sample(load_sst("test"), 4, seed=5)
    first, again = lattices(trees), lattices(trees)
    ids = {w: i for i, w in enumerate(lexicon())}
    for lat, twin, tree in zip(first, again, trees):
        assert (lat.chars, lat.tags, lat.words) == (twin.chars, twin.tags, twin.words)
        assert lat.text == " ".join(tree.tokens) and len(lat.chars) == len(lat.tags) == len(lat.text)
        assert all(lat.chars[k] == ALPHABET.index(ch) + 1 for k, ch in enumerate(lat.text) if ch in ALPHABET)
        assert all(ids[lat.text[s:e]] == w and 2 <= e - s <= 6 for s, e, w in lat.words)
        assert list(lat.words) == sorted(lat.words)
        assert all(lat.tags[k] == NEUTRAL for k, ch in enumerate(lat.text) if ch == " ")
    # every match is found: re-scan one sentence by brute force
    text = first[0].text
    found = {(s, e) for s in range(len(text)) for e in range(s + 2, min(s + 6, len(text)) + 1)
             if text[s:e] in ids}
    assert found == {(s, e) for s, e, _ in first[0].words}


@pytest.mark.parametrize("k", [0, 1, 5])
def test_complete_trees(k):
    trees = complete_trees(3, k, vocab=50, seed=2)
    assert [len(t) for t in trees] == [2 ** (k + 1) - 1] * 3
    assert all(len(t.leaf_words) == 2 ** k and int(t.height.max()) == k for t in trees)
    assert all(1 <= w < 50 for t in trees for w in t.leaf_words)
    again = complete_trees(3, k, vocab=50, seed=2)
    assert all((a.words == b.words).all() for a, b in zip(trees, again))


def test_node_type_is_a_fair_coin_on_ints_and_arrays():
    tree_index = np.repeat(np.arange(100, dtype=np.uint64), 50)
    node_index = np.tile(np.arange(50, dtype=np.uint64), 100)
    kinds = node_type(tree_index, node_index)
    assert 0.45 < kinds.mean() < 0.55
    assert [node_type(int(t), int(n)) for t, n in zip(tree_index[:200], node_index[:200])] == kinds[:200].tolist()
