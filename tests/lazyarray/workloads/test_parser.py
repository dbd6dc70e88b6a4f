"""The transition parser: its gold trees and oracle, and the same greedy parses eagerly, in a
scope (a flush per read) and under ``scope.map`` (a flush per step of all sentences)."""
import functools
import random

import numpy as np
import pytest

import lazyarray as la
from lazyarray.workloads import WORKLOADS, load_sst, vocabulary
from lazyarray.workloads import cell_style
from lazyarray.workloads.parser import LEFT, RIGHT, SHIFT, Configuration, dependencies, parse
from lazyarray.workloads.sst import parse as parse_tree


def test_head_of_a_phrase_is_the_head_of_its_right_child():
    sentence = dependencies(parse_tree("(3 (2 (2 a) (3 good)) (2 (2 movie) (2 .)))", vocabulary()))
    # a -> good, good -> ., movie -> ., . -> ROOT (= 4)
    assert sentence.heads == (1, 3, 3, 4)
    assert sentence.dependents == ((), (0,), (), (1, 2))


@functools.cache
def _short_sentences():
    return [s for s in map(dependencies, load_sst("test")) if len(s) <= 7][:40]


def _oracle_run(sentence):
    config = Configuration(len(sentence))
    while not config.terminal:
        legal = config.legal()
        costs = config.costs(sentence, legal)
        config.apply(min(legal, key=costs.__getitem__))
        assert min(costs.values()) == 0
    return tuple(config.heads)


def test_cost_zero_transitions_rebuild_every_gold_tree():
    for sentence in map(dependencies, load_sst("dev")):
        assert _oracle_run(sentence) == sentence.heads


def test_costs_are_the_gold_arcs_each_transition_loses():
    """Against brute force: the most gold heads any continuation can still assign."""
    rng = random.Random(0)
    for sentence in _short_sentences():
        heads, n = sentence.heads, len(sentence)

        @functools.cache
        def reachable(stack, b):
            moves = []
            if b < n:
                moves.append(reachable(stack + (b,), b + 1))
            if stack and (b < n or len(stack) == 1):
                moves.append((heads[stack[-1]] == b) + reachable(stack[:-1], b))
            if len(stack) > 1:
                moves.append((heads[stack[-1]] == stack[-2]) + reachable(stack[:-1], b))
            return max(moves, default=0)

        for _ in range(5):
            config = Configuration(n)
            while not config.terminal:
                legal = config.legal()
                stack, b = tuple(config.stack), config.b
                best = reachable(stack, b)
                for t, cost in config.costs(sentence, legal).items():
                    after = (stack + (b,), b + 1) if t == SHIFT else (stack[:-1], b)
                    made = t != SHIFT and heads[stack[-1]] == (b if t == LEFT else stack[-2])
                    assert cost == best - made - reachable(*after), (sentence.heads, stack, b, t)
                config.apply(rng.choice(legal))


def test_legal_transitions_end_in_one_tree():
    config = Configuration(2)
    assert config.legal() == [SHIFT]
    for t in (SHIFT, SHIFT):
        config.apply(t)
    assert config.legal() == [RIGHT]        # ROOT at the buffer front takes one word only
    config.apply(RIGHT)
    assert config.legal() == [LEFT]
    config.apply(LEFT)
    assert config.terminal and config.heads == [2, 0]


@pytest.fixture(scope="module")
def parser_case(case):
    w, params, lazy, sentences = case("parser", n=4, seed=2)
    with la.no_grad():
        eager = [parse(lazy, s) for s in sentences]
    return w, lazy, sentences, [t for t, _ in eager], np.array([float(loss) for _, loss in eager])


@pytest.mark.parametrize("scheduler", ["depth", "agenda"])
@pytest.mark.parametrize("style", ["ops", "cells"])
def test_map_batches_each_step_of_every_sentence(parser_case, assert_same, scheduler, style):
    w, lazy, sentences, transitions, losses = parser_case
    fn = parse if style == "ops" else cell_style.parser_parse
    with la.batching(scheduler=scheduler) as scope:
        mapped = scope.map(lambda s: fn(lazy, s), sentences)
    with la.batching(scheduler=scheduler) as serial:
        looped = [fn(lazy, s) for s in sentences]
    for results in (mapped, looped):
        assert [t for t, _ in results] == transitions
        assert_same([float(loss) for _, loss in results], losses)
    reads = [w.forces(s) for s in sentences]
    assert [len(t) for t in transitions] == reads
    assert scope.stats.flushes == max(reads) and serial.stats.flushes == sum(reads)


def test_one_word_sentence_has_no_loss(parser_case):
    _, lazy, sentences, _, _ = parser_case
    word = type(sentences[0])(0, sentences[0].words[:1], (1,))
    transitions, loss = parse(lazy, word)
    assert transitions == [SHIFT, LEFT] and float(loss) == 0


def test_chartagger_spells_each_word():
    sentence = WORKLOADS["chartagger"].data(1, seed=4)[0]
    tree = next(t for t in load_sst("test") if t.index == sentence.index)
    from lazyarray.workloads.lattices import ALPHABET
    assert ["".join(ALPHABET[c - 1] for c in chars) for chars in sentence.chars] == list(tree.tokens)
    assert sentence.words == tuple(tree.leaf_words.tolist()) and sentence.tags == tuple(tree.leaf_labels.tolist())
