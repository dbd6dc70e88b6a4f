"""ED-Batch §2.3: tabular Q-learning of a batching policy over sample graphs of one model.

Actions are the types on the frontier; the reward of batching type a is Eq. 1,
``-1 + alpha * |Frontier_a(G_t)| / |Frontier(G_t^a)|`` (the paper's worked example and its code
divide ready a-nodes by the a-nodes with no a-ancestor left; the printed fraction is upside
down), so every batch costs 1 and choices that Lemma 1 proves safe cost less. Updates bootstrap
``nstep`` steps ahead. Every ``check_every`` episodes the greedy policy is rolled out on every
sample: learning stops once it meets the lower bound (A.3), and the best table seen is kept,
since the shaped reward is not what is finally counted (batches).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass

from .bound import lower_bound
from .encodings import distinct_labels, encoder, vocabulary_ids
from .frontier import Frontier, agenda_rank, rollout
from .graph import GraphView

DEFAULTS = dict(encoding="sort", episodes=1000, alpha=0.5, epsilon=0.2, gamma=1.0, nstep=8, lr=0.5,
                phases=0, seed=0, check_every=50, patience=None, time_limit=None)


@dataclass
class Learned:
    """What ``train`` returns: the vocabulary (sorted labels), the Q table (state -> {action
    id: value}) and how learning went."""

    labels: list[str]
    table: dict
    stats: dict


class _Sample:
    """One sample graph prepared once: its environment, encoder, vocabulary ids, agenda order."""

    def __init__(self, view: GraphView, vocab: dict, encoding: str, phases: int):
        self.frontier = Frontier(view, typewise=True)
        self.gid = vocabulary_ids(vocab, view.type_labels)
        self.encode = encoder(encoding, self.gid, phases)
        self.rank = agenda_rank(view)
        self.local = {g: t for t, g in enumerate(self.gid)}
        self.bound = lower_bound(view)


def greedy(table: dict) -> dict:
    """state -> the action of highest value (ties: lowest id), over the actions tried."""
    return {s: max(q, key=lambda a: (q[a], -a)) for s, q in table.items() if q}


def chooser(encode, local: dict, rank: list[int], act: dict):
    """Frontier -> type: the table's choice, or the agenda rule in a state never seen."""
    def choose(f: Frontier) -> int:
        a = act.get(encode(f))
        return local[a] if a is not None else min(f.live, key=rank.__getitem__)
    return choose


def train(views: list[GraphView], encoding="sort", episodes=1000, alpha=0.5, epsilon=0.2, gamma=1.0,
          nstep=8, lr=0.5, phases=0, seed=0, check_every=50, patience=None, time_limit=None) -> Learned:
    """Learn on ``views`` (episodes cycle through them). ``alpha``: weight of Eq. 1's Lemma-1
    term; ``epsilon``: exploration; ``gamma``: discount; ``nstep``: bootstrapping horizon; ``lr``:
    step size; ``phases``: phase buckets in the state (0: none); ``patience``: stop after that
    many checks without a better greedy schedule; ``time_limit``: seconds."""
    views = [v for v in views if len(v)]
    if not views:
        raise ValueError("learning a policy needs at least one non-empty sample graph")
    if not (episodes >= 1 and 0 <= epsilon <= 1 and 0 < gamma <= 1 and nstep >= 1 and 0 < lr <= 1
            and alpha >= 0 and phases >= 0 and check_every >= 1):
        raise ValueError(f"bad learning options: episodes={episodes}, epsilon={epsilon}, gamma={gamma}, "
                         f"nstep={nstep}, lr={lr}, alpha={alpha}, phases={phases}, check_every={check_every}")
    began = time.perf_counter()
    labels = sorted({label for v in views for label in distinct_labels(v.type_labels)})
    vocab = {label: i for i, label in enumerate(labels)}
    samples = [_Sample(v, vocab, encoding, phases) for v in views]
    bound = sum(s.bound for s in samples)
    rng = random.Random(seed)
    table: dict = {}
    discounts = [gamma ** i for i in range(nstep + 1)]

    def evaluate():
        act = greedy(table)
        return sum(len(rollout(s.frontier, chooser(s.encode, s.local, s.rank, act))) for s in samples)

    best = evaluate()  # the untrained policy is the agenda rule
    best_table, best_episode, stale, episode = {}, 0, 0, 0
    while episode < episodes and best > bound:
        _episode(samples[episode % len(samples)], table, rng, alpha, epsilon, nstep, lr, discounts)
        episode += 1
        late = time_limit is not None and time.perf_counter() - began > time_limit
        if episode % check_every and episode < episodes and not late:
            continue
        batches = evaluate()
        if batches < best:
            best, best_episode, stale = batches, episode, 0
            best_table = {s: dict(q) for s, q in table.items()}
        else:
            stale += 1
        if late or (patience is not None and stale >= patience):
            break
    stats = dict(episodes=episode, best_episode=best_episode, batches=best, lower_bound=bound,
                 seconds=time.perf_counter() - began, states=len(best_table))
    return Learned(labels, best_table, stats)


def _episode(sample: _Sample, table: dict, rng: random.Random, alpha, epsilon, nstep, lr, discounts):
    """One ε-greedy pass over a sample graph with n-step Q updates."""
    f, encode, gid, rank = sample.frontier, sample.encode, sample.gid, sample.rank
    f.reset()
    states, actions, rewards = [], [], []
    state = encode(f)
    horizon = discounts[nstep]
    while True:
        if rng.random() < epsilon:
            options = sorted(f.live, key=gid.__getitem__)
            t = options[rng.randrange(len(options))]
        else:
            q = table.get(state)
            if q:
                t = max(f.live, key=lambda t: (q.get(gid[t], 0.0), -rank[t]))
            else:
                t = min(f.live, key=rank.__getitem__)
        reward = alpha * f.ratio(t) - 1.0
        f.take(t)
        states.append(state)
        actions.append(gid[t])
        rewards.append(reward)
        if f.done == f.n:
            break
        state = encode(f)
        j = len(rewards) - nstep
        if j >= 0:
            q = table.get(state)
            # untried actions count as 0 (optimistic: every reward is negative)
            future = (max(0.0, *q.values()) if len(q) < len(f.live) else max(q.values())) if q else 0.0
            _update(table, states[j], actions[j], rewards, j, len(rewards), discounts, horizon * future, lr)
    end = len(rewards)
    for j in range(max(0, end - nstep), end):
        _update(table, states[j], actions[j], rewards, j, end, discounts, 0.0, lr)


def _update(table, state, action, rewards, lo, hi, discounts, tail, lr):
    target = tail
    for i in range(lo, hi):
        target += discounts[i - lo] * rewards[i]
    q = table.get(state)
    if q is None:
        q = table[state] = {}
    old = q.get(action, 0.0)
    q[action] = old + lr * (target - old)
