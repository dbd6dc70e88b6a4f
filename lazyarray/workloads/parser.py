"""Transition parser: greedy arc-hybrid dependency parsing with BiLSTM features and an MLP scorer
(Kiperwasser & Goldberg 2016; DyNet's Table 1 parser is of this family), over SST sentences.

The model whose control flow depends on its values: each transition is the highest-scoring legal
one, so the code reads its scores (``np.asarray``) before it can build the next step. Written per
sentence, it runs eagerly, in a scope (every read flushes) or as tasks of ``scope.map`` (a read
waits, and one flush serves the current step of every sentence: as many flushes as the longest
sentence has transitions, DyNet's "b parsers in parallel" without restructuring the code).

- words: `x_i = E[w_i]`; `v_i = [hf_i; hb_i]`, a forward and a backward LSTM over x (chains).
- configuration (arc-hybrid): a stack σ and a buffer β = words b..n-1 followed by ROOT (= n).
  SHIFT pushes b; LEFT pops s0 with head b (with b = ROOT only when s0 is the last word on the
  stack: one root); RIGHT pops s0 with head s1. A sentence of n words takes 2n transitions.
- features: `f = [v_s2; v_s1; v_s0; v_b0]`, a learned `pad` (2H) for an empty stack slot and a
  learned `root` (2H) for ROOT; scores (SHIFT, LEFT, RIGHT) `= W_out tanh(W_mlp f + b_mlp) + b_out`.
- decoding: the legal transition of highest score (the first on ties).
- gold trees: the SST binary trees as dependencies, the head of a phrase being the head of its
  right child (the left child's head depends on it; the sentence's head on ROOT). Projective,
  so the transitions of cost 0 (below) always rebuild them.
- loss (K&G's hinge with the arc-hybrid dynamic oracle of Goldberg & Nivre 2013): the parser
  follows its own decisions, off the gold path too, where a static oracle has no answer; the cost
  of a transition is the number of gold arcs it makes unreachable (on the gold path the static
  oracle's transition is one of cost 0). At every step with a legal transition of positive cost:
  `relu(1 - s[g] + s[w])`, g the best-scoring legal transition of cost 0, w the best-scoring
  one of positive cost.
  Sentence loss = sum over its steps (0 for a one-word sentence); scope result = sum over sentences.

The parameters are random, as for every workload: untrained, the decisions follow the weights
more than the words (with seed 0, SHIFT and LEFT alternate). Every sentence still takes 2n steps
of one scorer call each, so the work does not depend on them; the stack shapes, hence which
feature slots are padded, do.
"""
import numpy as np

import lazyarray as la

from .cells import lstm_cell
from .chains import mlp_output, run_lstm
from .params import init

SHIFT, LEFT, RIGHT = 0, 1, 2
TRANSITIONS = 3
FEATURES = 4  # s2, s1, s0, b0


class DepSentence:
    """An SST sentence as a dependency tree: word ids, `heads[i]` (n for ROOT) and each word's
    dependents, in sentence order."""

    __slots__ = ("index", "words", "heads", "dependents")

    def __init__(self, index, words, heads):
        self.index, self.words, self.heads = index, words, heads
        self.dependents = tuple(tuple(d for d, h in enumerate(heads) if h == i) for i in range(len(heads)))

    def __len__(self):
        return len(self.words)


def dependencies(tree):
    """The tree's words with the head rule above (post-order: children come before parents)."""
    head_of, head_word, n = {}, [], 0   # a word's head; each node's phrase head; words so far
    for left, right in zip(tree.left.tolist(), tree.right.tolist()):
        if left < 0:
            head_word.append(n)
            n += 1
        else:
            head_of[head_word[left]] = head_word[right]
            head_word.append(head_word[right])
    return DepSentence(tree.index, tuple(tree.leaf_words.tolist()), tuple(head_of.get(i, n) for i in range(n)))


class Configuration:
    """Arc-hybrid state of a sentence of n words: the stack, the buffer front b (the buffer is
    b..n-1 then ROOT = n) and the heads assigned so far. Plain Python over ints: every
    implementation of the parser (lazyarray, hand-batched, PyTorch, DyNet) shares it."""

    __slots__ = ("n", "stack", "b", "on_stack", "heads")

    def __init__(self, n):
        self.n, self.stack, self.b = n, [], 0
        self.on_stack, self.heads = [False] * n, [None] * n

    @property
    def terminal(self):
        return not self.stack and self.b == self.n

    def legal(self):
        stack, b, n = self.stack, self.b, self.n
        return ([SHIFT] if b < n else []) + ([LEFT] if stack and (b < n or len(stack) == 1) else []) \
            + ([RIGHT] if len(stack) > 1 else [])

    def apply(self, transition):
        if transition == SHIFT:
            self.stack.append(self.b)
            self.on_stack[self.b] = True
            self.b += 1
            return
        s0 = self.stack.pop()
        self.on_stack[s0] = False
        self.heads[s0] = self.b if transition == LEFT else self.stack[-1]

    def features(self):
        """Positions of s2, s1, s0 (None where the stack is shorter) and b0 (n: ROOT)."""
        stack = self.stack
        return [stack[-k] if len(stack) >= k else None for k in (3, 2, 1)] + [self.b]

    def costs(self, sentence, legal):
        """For each legal transition, the gold arcs it makes unreachable (Goldberg & Nivre 2013,
        with the one-root rule: a word on ROOT must be alone on the stack when b reaches ROOT)."""
        stack, b, heads = self.stack, self.b, sentence.heads
        out = {}
        if SHIFT in legal:  # b leaves the buffer: its dependents on the stack; its head if that is
            h = heads[b]    # deeper than s0, or ROOT while the stack is not empty
            out[SHIFT] = sum(self.on_stack[d] for d in sentence.dependents[b] if d < b) \
                + (bool(stack) and (h == self.n or (self.on_stack[h] and h != stack[-1])))
        if stack:           # s0 is popped: its dependents still in the buffer; its head if that is a
            s0, n = stack[-1], self.n   # word after b, s1 (LEFT), or ROOT with s0 alone (LEFT)
            h, pending = heads[s0], sum(d >= b for d in sentence.dependents[s0])
            if LEFT in legal:
                out[LEFT] = pending + (b < h < n or (h == n and b < n and len(stack) == 1)
                                       or (len(stack) > 1 and h == stack[-2]))
            if RIGHT in legal:
                out[RIGHT] = pending + (b <= h < n)
        return out


def margin_pair(values, costs):
    """(g, w) of the hinge: the best-scoring transitions of cost 0 and of positive cost (None if
    no legal one costs anything). Exact costs leave some transition of cost 0 everywhere."""
    good = [t for t, c in costs.items() if c == 0]
    wrong = [t for t, c in costs.items() if c > 0]
    if not wrong:
        return None
    return max(good, key=values.__getitem__), max(wrong, key=values.__getitem__)


def parser_params(H, vocab, seed=0):
    return init(seed, E=(vocab, H), Wf=(4 * H, 2 * H), bf=(4 * H,), Wb=(4 * H, 2 * H), bb=(4 * H,),
                pad=(2 * H,), root=(2 * H,), W_mlp=(H, FEATURES * 2 * H), b_mlp=(H,),
                W_out=(TRANSITIONS, H), b_out=(TRANSITIONS,))


def encode(p, words, step=lstm_cell):
    """v_i = [hf_i; hb_i] for every word."""
    xs = [p.E[w] for w in words]
    fwd, _ = run_lstm(p.Wf, p.bf, xs, step=step)
    bwd, _ = run_lstm(p.Wb, p.bb, xs[::-1], step=step)
    return [la.concatenate([f, b]) for f, b in zip(fwd, bwd[::-1])]


def hinge(scores, good, wrong):
    return la.relu(1 - scores[good] + scores[wrong])


def parse(p, sentence, step=lstm_cell, score=mlp_output, hinge=hinge):
    """Greedy parse of one sentence: (its transitions, its summed hinge loss). `step`, `score`,
    `hinge`: the LSTM step, the scorer and the loss term, as cells in cell-style code."""
    vectors = encode(p, sentence.words, step)
    vectors.append(p.root)
    config = Configuration(len(sentence))
    transitions, losses = [], []
    while not config.terminal:
        scores = score(p, la.concatenate([p.pad if i is None else vectors[i] for i in config.features()]))
        values = np.asarray(scores)     # the next step depends on them: forces (waits, under map)
        legal = config.legal()
        pair = margin_pair(values, config.costs(sentence, legal))
        if pair is not None:
            losses.append(hinge(scores, *pair))
        best = max(legal, key=values.__getitem__)
        config.apply(best)
        transitions.append(best)
    return transitions, la.sum(la.stack(losses)) if losses else la.array(np.zeros((), np.float32))


def parser_loss(p, sentence):
    return parse(p, sentence)[1]


def transitions(sentence):
    """How many transitions (each one value read) a sentence takes: 2n."""
    return 2 * len(sentence)
