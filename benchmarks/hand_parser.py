"""The transition parser batched by hand, as DyNet's paper restructured its parser to batch it
("run b different parsers in parallel"): the BiLSTMs of all sentences as sorted chains, then each
sentence's parse is a generator that yields the table rows of its features and receives its
scores, and a driver steps every unfinished parser in lock-step, scoring all of them with one
matrix product per layer. The decisions and the transition system are the workload's own
(lazyarray.workloads.parser)."""
import numpy as np

from lazyarray.workloads.parser import Configuration, margin_pair

from .hand_chains import Chains, lstm_sorted


def _parser(sentence, rows, pad, pairs):
    """One sentence's greedy parse. `rows[i]`: the table row of word i's vector (rows[n]: ROOT);
    receives (its scores, their row among all steps' scores); appends (row, g, w) of each hinge
    term to `pairs`; returns the transitions."""
    config = Configuration(len(sentence))
    transitions = []
    while not config.terminal:
        values, row = yield [pad if i is None else rows[i] for i in config.features()]
        legal = config.legal()
        pair = margin_pair(values, config.costs(sentence, legal))
        if pair is not None:
            pairs.append((row, *pair))
        best = max(legal, key=values.__getitem__)
        config.apply(best)
        transitions.append(best)
    return transitions


def parse(p, sentences):
    """(transitions of each sentence, summed hinge loss) of the greedy parses."""
    ch = Chains([s.words for s in sentences])
    X = p.E[ch.words]
    fwd, _, _ = lstm_sorted(ch, X, p.Wf, p.bf)
    bwd, _, _ = lstm_sorted(ch, X, p.Wb, p.bb, reverse=True)
    table = np.concatenate([fwd, bwd], axis=1)
    pad, root = len(table), len(table) + 1
    table = np.concatenate([table, p.pad[None], p.root[None]])
    W_mlp, W_out = np.ascontiguousarray(p.W_mlp.T), np.ascontiguousarray(p.W_out.T)
    first = np.empty_like(ch.starts)
    first[ch.order] = ch.starts
    pairs = []
    parsers = [_parser(s, [*range(f, f + len(s)), root], pad, pairs) for s, f in zip(sentences, first)]
    requests = [next(g) for g in parsers]
    live, transitions, scores, done = list(range(len(parsers))), [None] * len(parsers), [], 0
    while live:
        features = table[np.array([requests[k] for k in live])].reshape(len(live), -1)
        step = np.tanh(features @ W_mlp + p.b_mlp) @ W_out + p.b_out
        scores.append(step)
        running = []
        for j, k in enumerate(live):
            try:
                requests[k] = parsers[k].send((step[j], done + j))
                running.append(k)
            except StopIteration as finished:
                transitions[k] = finished.value
        done += len(live)
        live = running
    scores = np.concatenate(scores)
    row, good, wrong = np.array(pairs, np.int64).reshape(-1, 3).T
    return transitions, np.maximum(0, 1 - scores[row, good] + scores[row, wrong]).sum(dtype=np.float32)


def parser_loss(p, sentences):
    return parse(p, sentences)[1]
