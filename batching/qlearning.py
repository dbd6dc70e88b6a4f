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

import functools
import random
import time
from dataclasses import dataclass

from .bound import lower_bound
from .encodings import ENCODINGS, distinct_labels, encoder, vocabulary_ids
from .frontier import Frontier, agenda_rank, rollout
from .graph import GraphView

DEFAULTS = dict(encoding="sort", episodes=1000, alpha=0.5, epsilon=0.2, gamma=0.9, nstep=8, lr=0.5,
                phases=0, seed=0, check_every=50, patience=6, time_limit=None, prior="sufficient")
PRIORS = ("sufficient", "agenda", "optimistic")


@dataclass
class Learned:
    """What ``train`` returns: the vocabulary (sorted labels), the Q table (state -> {action
    id: value}), the options used and how learning went."""

    labels: list[str]
    table: dict
    options: dict
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
        self.baseline: list[float] = []


def greedy(table: dict) -> dict:
    """state -> the action of highest value (ties: lowest id), over the actions tried."""
    return {s: max(q, key=lambda a: (q[a], -a)) for s, q in table.items() if q}


def chooser(encode, local: dict, rank: list[int], act: dict):
    """Frontier -> type: the table's choice, or the agenda rule in a state never seen."""
    def choose(f: Frontier) -> int:
        a = act.get(encode(f))
        return local[a] if a is not None else min(f.live, key=rank.__getitem__)
    return choose


def train(views: list[GraphView], **options) -> Learned:
    """Learn on ``views`` (episodes cycle through them); ``options`` override ``DEFAULTS``:
    ``encoding`` (``encodings.ENCODINGS``), ``episodes`` (at most), ``alpha`` (weight of Eq. 1's
    Lemma-1 term), ``epsilon`` (exploration), ``gamma`` (discount), ``nstep`` (bootstrapping
    horizon), ``lr`` (step size), ``phases`` (progress buckets in the state, 0: none), ``seed``,
    ``check_every`` (episodes between greedy checks), ``patience`` (checks without a better
    schedule before stopping; None: no limit), ``time_limit`` (seconds), ``prior``: what a
    state does before it has values -- "sufficient" (the Lemma-1 ratio, so the first pass
    distils §5.3's heuristic), "agenda", or "optimistic" (ED-Batch: untried actions are worth
    0, above any return, so each state tries them all)."""
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown learning options {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    o = {**DEFAULTS, **options}
    episodes, epsilon, gamma, nstep, lr = o["episodes"], o["epsilon"], o["gamma"], o["nstep"], o["lr"]
    if o["encoding"] not in ENCODINGS:
        raise ValueError(f"unknown encoding {o['encoding']!r}; choose from {ENCODINGS}")
    if o["prior"] not in PRIORS:
        raise ValueError(f"unknown prior {o['prior']!r}; choose from {PRIORS}")
    if not (episodes >= 1 and 0 <= epsilon <= 1 and 0 < gamma <= 1 and nstep >= 1 and 0 < lr <= 1
            and o["alpha"] >= 0 and o["phases"] >= 0 and o["check_every"] >= 1):
        raise ValueError("bad learning options: " + ", ".join(f"{k}={o[k]}" for k in (
            "episodes", "epsilon", "gamma", "nstep", "lr", "alpha", "phases", "check_every")))
    views = [v for v in views if len(v)]
    if not views:
        raise ValueError("learning a policy needs at least one non-empty sample graph")
    began = time.perf_counter()
    labels = sorted({label for v in views for label in distinct_labels(v.type_labels)})
    vocab = {label: i for i, label in enumerate(labels)}
    samples = [_Sample(v, vocab, o["encoding"], o["phases"]) for v in views]
    bound = sum(s.bound for s in samples)
    rng = random.Random(o["seed"])
    table: dict = {}
    run = functools.partial(_episode, table=table, rng=rng, alpha=o["alpha"], nstep=nstep, lr=lr,
                            discounts=[gamma ** i for i in range(nstep + 2)], prior=o["prior"])

    def evaluate():
        """Greedy schedules of every sample; states met for the first time get the prior's
        choice, so that the table covers the path it is judged by."""
        return sum(run(sample, epsilon=0.0, learn=False) for sample in samples)

    agenda = sum(len(rollout(s.frontier, chooser(s.encode, s.local, s.rank, {}))) for s in samples)
    best, best_episode, stale, episode = evaluate(), 0, 0, 0  # the prior's schedules
    best_table = {s: dict(q) for s, q in table.items()}
    while episode < episodes and best > bound:
        run(samples[episode % len(samples)], epsilon=epsilon)
        episode += 1
        late = o["time_limit"] is not None and time.perf_counter() - began > o["time_limit"]
        if episode % o["check_every"] and episode < episodes and not late:
            continue
        batches = evaluate()
        if batches < best:
            best, best_episode, stale = batches, episode, 0
            best_table = {s: dict(q) for s, q in table.items()}
        else:
            stale += 1
        if late or (o["patience"] is not None and stale >= o["patience"]):
            break
    stats = dict(episodes=episode, best_episode=best_episode, batches=best, lower_bound=bound, agenda=agenda,
                 seconds=time.perf_counter() - began, states=len(best_table))
    return Learned(labels, best_table, o, stats)


def _episode(sample: _Sample, table: dict, rng: random.Random, alpha, epsilon, nstep, lr, discounts,
             prior, learn=True) -> int:
    """One ε-greedy pass over a sample graph; returns its number of batches. With ``learn``,
    n-step Q updates: a return stops early at an exploratory step and bootstraps from the state
    before it (Watkins), so that it measures the greedy policy rather than the noise of random
    choices. Values are advantages over ``sample.baseline[t]``, the mean return from step t on:
    a state recurs at many points of a graph (a tree level looks like the next), and raw values
    would compare the times of the visits rather than the actions."""
    f, encode, gid, rank, base = sample.frontier, sample.encode, sample.gid, sample.rank, sample.baseline
    f.reset()
    states, actions, rewards = [], [], []
    pending = steps = 0  # steps before ``pending`` have had their update

    def v(step):
        return base[step] if step < len(base) else 0.0

    def settle(last, upto, value):
        """Update steps ``pending..last`` with returns that end at step ``upto``, whose state
        has advantage ``value``."""
        nonlocal pending
        for j in range(pending, last + 1):
            target = discounts[upto - j] * (value + v(upto)) - v(j)
            for i in range(j, upto):
                target += discounts[i - j] * rewards[i]
            q = table[states[j]]
            # a new action starts from the state's best value: one lucky return must not
            # overturn what many visits say (noise would otherwise win every max)
            old = q.get(actions[j])
            if old is None:
                old = max(q.values(), default=target)
            q[actions[j]] = old + lr * (target - old)
        pending = last + 1

    while True:
        state = encode(f)
        q = table.get(state)
        if q is None:
            q = table[state] = {}
            if prior != "optimistic":
                pick = (lambda t: (f.ratio(t), -rank[t])) if prior == "sufficient" else (lambda t: -rank[t])
                q[gid[max(f.live, key=pick)]] = 0.0
        explore = epsilon and rng.random() < epsilon
        step = len(states)
        if learn and (explore or step - pending >= nstep):
            value = max(q.values(), default=0.0)
            if prior == "optimistic" and len(q) < len(f.live):
                value = max(value, 0.0)  # untried actions count as 0: every reward is negative
            settle(step - 1 if explore else pending, step, value)
        if explore:
            options = sorted(f.live, key=gid.__getitem__)
            t = options[rng.randrange(len(options))]
        elif prior == "optimistic":
            t = max(f.live, key=lambda t: (q.get(gid[t], 0.0), -rank[t]))
        else:
            t = sample.local[max(q, key=lambda a: (q[a], -a))]
        if learn:
            rewards.append(alpha * f.ratio(t) - 1.0)
            states.append(state)
            actions.append(gid[t])
        f.take(t)
        steps += 1
        if f.done == f.n:
            break
    end = len(rewards)
    if learn:
        settle(end - 1, end, 0.0)
        togo, returns = 0.0, [0.0] * end
        for i in range(end - 1, -1, -1):
            togo = returns[i] = rewards[i] + discounts[1] * togo
        sample.baseline = [b + 0.5 * (g - b) for g, b in zip(returns, base + [0.0] * (end - len(base)))]
    return steps
