"""ED-Batch §2.3: tabular Q-learning of a batching policy over sample graphs of one model.

Actions are the types on the frontier; the reward of batching type a is Eq. 1,
``-1 + alpha * |Frontier_a(G_t)| / |Frontier(G_t^a)|`` (the paper's worked example and its code
divide ready a-nodes by the a-nodes with no a-ancestor left; the printed fraction is upside
down), so every batch costs 1 and choices that Lemma 1 proves safe cost less. Updates bootstrap
``nstep`` steps ahead. Every ``check_every`` episodes the greedy policy is rolled out on every
sample: learning stops once it meets the lower bound (A.3), and the best table seen is kept,
since the shaped reward is not what is finally counted (batches). With several samples a better
table must also hold up on graphs it was not fitted to: each sample is scheduled with only what
the table knows from the other samples' greedy states (``heldout``); a table that gains on its
samples but not there, or does much worse there than on its own samples (``CARRY_OVER``), is
not kept (op-level lattices: returns are noisy and states are seen a few times, so the gains
are luck that sends new graphs astray). The table kept holds the states of its greedy
schedules, the FSM that was judged, and the states that the Lemma-1 prior decided while
learning and that recurred (``RECURRING``), with the prior's choice: the samples' greedy
schedules never meet them, but new graphs do, and at run time there is no G^a to make that
choice again (a new cell-level lattice meets states the greedy schedules never visited in 91%
of its steps).

With E_sort, a state met for the first time can start from the choice of the first state
learned with the same frontier types (``twins``): E_sort splits one decision into a state per
order of the counts, which change as instances end, and the prior decides each split state anew
(BiLSTM: the same LSTM step chose differently once the output layer's nodes became the most
common). Whether it does is settled by the first greedy schedules: twins are used if the samples
take fewer batches with them (chains: 5-6% fewer; op-level lattices: 50% more, their orders of
counts tell apart states that need other choices). Q-learning's values are noisy (returns over
~1,000 steps whose choices differ by a batch), so the kept FSM is then improved exactly
(``refine``): in its recurring states, one change of choice at a time, rolled out greedily on
every sample, kept when the samples take fewer batches and none more (LSTM-NMT: the decoder
batched multiply before tanh at one state, a batch per step, 1.05x the bound; one change
reaches it, which 1,500 episodes of Q-learning did not).
"""
from __future__ import annotations

import functools
import random
import time
from array import array
from dataclasses import dataclass

from .encodings import ENCODINGS, distinct_labels, encoder, same_types, split_phase, vocabulary_ids
from .frontier import Frontier, agenda_rank, rollout
from .graph import GraphView
from .schedulers import AgendaScheduler

DEFAULTS = dict(encoding="sort", episodes=1000, alpha=1.0, epsilon=0.2, gamma=0.9, nstep=8, lr=0.5,
                phases=0, seed=0, check_every=50, patience=6, patience_nodes=3_000_000, refine_nodes=5_000_000,
                time_limit=None, node_limit=None, prior="sufficient")
PRIORS = ("sufficient", "agenda", "optimistic")
#: What each numeric option must be (None: no limit, where the option allows it).
RULES = {
    "episodes": (lambda v: v >= 1, ">= 1"), "epsilon": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "gamma": (lambda v: 0 < v <= 1, "in (0, 1]"), "nstep": (lambda v: v >= 1, ">= 1"),
    "lr": (lambda v: 0 < v <= 1, "in (0, 1]"), "alpha": (lambda v: v >= 0, ">= 0"),
    "phases": (lambda v: v >= 0, ">= 0"), "check_every": (lambda v: v >= 1, ">= 1"),
    "patience": (lambda v: v is None or v >= 0, ">= 0 or None"),
    "patience_nodes": (lambda v: v is None or v >= 1, ">= 1 or None"),
    "refine_nodes": (lambda v: v >= 0, ">= 0"),
    "time_limit": (lambda v: v is None or v >= 0, ">= 0 or None"),
    "node_limit": (lambda v: v is None or v >= 0, ">= 0 or None"),
}


def _holds(rule, value) -> bool:
    try:
        return bool(rule(value))
    except TypeError:       # a string where a number belongs
        return False
#: A better table is kept only if its samples, each scheduled from what it learned on the others,
#: take at most this much more than with the whole table: the gain is one that carries over to a
#: new graph. (Trees and chains: 0%; op-level lattices: 10-50%, where its gains on the samples
#: were seen to turn into losses on other scopes, so the heuristic's table is kept.)
CARRY_OVER = 0.05
#: Visits while learning (every rollout) past which a state the prior decided joins the kept
#: FSM. Over four new scopes: cell-level lattices 12% fewer batches (1.8k states added; 3,125 ->
#: 2,735), op-level lattices 2-3% (8k added); trees and chains unchanged. Kept from 1 visit, the
#: gains were alike but op-level lattices added 155-250k states.
RECURRING = 8
_VISIT = 1 << 32  # a visit in ``met``'s count, above the choice's vocabulary id


@dataclass
class Learned:
    """What ``train`` returns: the vocabulary (sorted labels), the Q table (state -> {action
    id: value}), the options used and how learning went (``stats``: episodes, batches on the
    samples against their lower bound and the agenda's, ``heldout`` -- None where the first
    schedules met the bound, so no table was judged --, seconds, states)."""

    labels: list[str]
    table: dict
    options: dict
    stats: dict


class _Sample:
    """One sample graph prepared once: its environment, encoder, vocabulary ids, agenda order."""

    def __init__(self, view: GraphView, vocab: dict, encoding: str, phases: int):
        self.gid = vocabulary_ids(vocab, view.type_labels)
        self.frontier = Frontier(view, typewise=True, gid=self.gid)
        self.encode = encoder(encoding, phases)
        self.rank = agenda_rank(view)
        self.ranking = lambda: self.rank
        self.local = {g: t for t, g in enumerate(self.gid)}
        self.bound = self.frontier.bound
        self.baseline: list[float] = []


def greedy_act(q: dict) -> int:
    """The action of highest value (ties: lowest id) among those tried."""
    return max(q, key=lambda a: (q[a], -a))


def greedy(table: dict) -> dict:
    """state -> its greedy action."""
    return {s: greedy_act(q) for s, q in table.items() if q}


def prefix_votes(table: dict, phases: int = 0) -> PrefixVotes:
    """E_sort's backoff, over the prefixes of the learned states' types (their most common
    types; per phase). A prefix's answer is its own types that most learned states with that
    prefix chose (ties all kept), or where they chose none of them (a vote for a type outside
    the prefix was cast on the rest of a frontier a new state need not share), the answer of
    the prefix one shorter. A state never seen is then read as the learned states that agree
    with it on its most common types, at the cost of a walk down its prefixes. (Votes of the
    learned states with the same types in another order, tried first, changed nothing on trees
    and chains and cost op-level lattices up to 18% more batches on new scopes.)

    Built from the states in sorted order, so that the states below a prefix come one after
    another: a prefix's votes are counted while it is on the current path, without recursion (a
    state can hold thousands of types) or a dict per prefix (a trie of nested dicts took 60
    times the size of a policy file of a million states); prefixes whose answer is that of
    every prefix below them add nothing to the walk and are dropped."""
    parent, last = array("q"), array("q")  # per prefix: the one a type shorter (-1: none), that type
    own: list = []  # per prefix: its own answer, None where it inherits one
    answers: dict = {}  # each distinct answer once
    path: list = []  # the open prefixes, empty one first: [prefix, its last type, votes]
    starts: dict = {}  # phase tail -> its empty prefix

    def close(keep: int):
        while len(path) > keep:
            node, _, votes = path.pop()
            if votes:
                if len(votes) == 1:
                    mine = tuple(votes)
                else:
                    top = max(votes.values())
                    mine = tuple(sorted(a for a, n in votes.items() if n == top))
                own[node] = answers.setdefault(mine, mine)

    def open_prefix(above: int, g: int) -> int:
        parent.append(above)
        last.append(g)
        own.append(None)
        return len(own) - 1

    for state in sorted((s for s, q in table.items() if q), key=(lambda s: (s[-1], s[:-1])) if phases else None):
        kinds, tail = split_phase(state, phases)
        best = greedy_act(table[state])
        if tail not in starts:
            close(0)
            starts[tail] = open_prefix(-1, -1)
            path.append([starts[tail], -1, None])
        shared = 0
        while shared < len(kinds) and shared + 1 < len(path) and path[shared + 1][1] == kinds[shared]:
            shared += 1
        close(shared + 1)
        for g in kinds[shared:]:
            path.append([open_prefix(path[-1][0], g), g, {}])
        # best's vote counts where the prefix holds it
        for entry in path[1 + kinds.index(best) if best in kinds else len(path):]:
            entry[2][best] = entry[2].get(best, 0) + 1
    close(0)
    said = list(own)
    for v, u in enumerate(parent):  # prefixes come after the ones a type shorter
        if said[v] is None:
            said[v] = said[u] if u >= 0 else ()
    keep = bytearray(len(said))
    for v in range(len(said) - 1, -1, -1):
        u = parent[v]
        if u >= 0 and (keep[v] or said[v] != said[u]):
            keep[v] = keep[u] = 1
    kept = [v for v in range(len(said)) if keep[v]]
    renumber = dict(zip(kept, range(len(kept))))
    spread = max(last, default=0) + 1
    child = {renumber[parent[v]] * spread + last[v]: renumber[v] for v in kept if parent[v] >= 0}
    return PrefixVotes({tail: renumber[v] for tail, v in starts.items() if keep[v]}, child,
                       [said[v] for v in kept], spread, phases)


class PrefixVotes:
    """``prefix_votes``'s answers, flat: ``child[prefix * spread + g]`` is the prefix one type
    ``g`` longer, ``said[prefix]`` its answer, ``starts[tail]`` the empty prefix of a phase."""

    __slots__ = ("starts", "child", "said", "spread", "phases")

    def __init__(self, starts: dict, child: dict, said: list, spread: int, phases: int):
        self.starts, self.child, self.said, self.spread, self.phases = starts, child, said, spread, phases

    def answer(self, state: tuple) -> tuple:
        """The answer of the longest proper prefix of ``state``'s types that learned states
        share; () if none."""
        kinds, tail = split_phase(state, self.phases)
        node, votes = self.starts.get(tail), ()
        if node is not None:
            child, said, spread = self.child, self.said, self.spread
            for g in kinds[:-1]:
                node = child.get(node * spread + g) if g < spread else None
                if node is None:
                    break
                votes = said[node]
        return votes


def chooser(encode, local: dict, ranking, act: dict, backoff: PrefixVotes | None = None):
    """Frontier -> type: the table's choice; in a state never seen, ``unseen``'s."""
    fallback = unseen(local, ranking, backoff)

    def choose(f: Frontier) -> int:
        state = encode(f)
        a = act.get(state)
        return local[a] if a is not None else fallback(f, state)
    return choose


def unseen(local: dict, ranking, backoff: PrefixVotes | None = None):
    """(frontier, state) -> type for a state the table lacks: with ``backoff``
    (``prefix_votes``), the answer of the longest proper prefix of the state that learned
    states share, ties to the agenda order; else the agenda rule. ``ranking()`` gives the agenda
    order (``agenda_rank``); it runs at the first tie or fallback, so a schedule the table
    covers never pays for it (~6% of scheduling a Tree-FC scope)."""
    ranks: dict = {}  # vocabulary id -> its type's place in the agenda order

    def by_rank():
        if not ranks:
            rank = ranking()
            ranks.update((g, rank[t]) for g, t in local.items())
        return ranks.__getitem__

    def fallback(f: Frontier, state) -> int:
        votes = backoff.answer(state) if backoff is not None else ()
        if votes:
            return local[votes[0] if len(votes) == 1 else min(votes, key=by_rank())]
        return local[min(f.order, key=by_rank())]
    return fallback


def train(views: list[GraphView], **options) -> Learned:
    """Learn on ``views`` (episodes cycle through them); ``options`` override ``DEFAULTS``:
    ``encoding`` (``encodings.ENCODINGS``), ``episodes`` (at most), ``alpha`` (weight of Eq. 1's
    Lemma-1 term), ``epsilon`` (exploration), ``gamma`` (discount), ``nstep`` (bootstrapping
    horizon), ``lr`` (step size), ``phases`` (progress buckets in the state, 0: none), ``seed``,
    ``check_every`` (episodes between greedy checks), ``patience`` (checks without a better
    schedule before stopping; None: no limit), ``patience_nodes`` (or once the episodes since
    the last better schedule have batched this many nodes: the same patience in work, so that
    big graphs -- a 64-sentence op-level lattice is 130-155k nodes, 3.5 LSTM-NMT scopes -- do
    not explore for minutes; the default stops learning before ``patience`` does past 10k
    nodes a sample; None: no limit), ``refine_nodes`` (most nodes batched by ``refine``'s
    trial schedules; 0: no refinement), ``time_limit`` (seconds), ``node_limit`` (nodes batched
    by all of learning's rollouts: a budget like ``time_limit`` whose result does not depend on
    the machine's speed), ``prior``: what a state does
    before it has values -- "sufficient" (the Lemma-1 ratio, so the first pass
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
    bad = [f"{k}={o[k]!r} (must be {rule})" for k, (holds, rule) in RULES.items() if not _holds(holds, o[k])]
    if bad:
        raise ValueError("bad learning options: " + "; ".join(bad))
    views = [v for v in views if len(v)]
    if not views:
        raise ValueError("learning a policy needs at least one non-empty sample graph")
    began = time.perf_counter()
    labels = sorted({label for v in views for label in distinct_labels(v.type_labels)})
    vocab = {label: i for i, label in enumerate(labels)}
    samples = [_Sample(v, vocab, o["encoding"], o["phases"]) for v in views]

    def late() -> bool:
        return (o["time_limit"] is not None and time.perf_counter() - began > o["time_limit"]) or \
            (o["node_limit"] is not None and sum(s.frontier.spent + s.frontier.done for s in samples) > o["node_limit"])

    bound = sum(s.bound for s in samples)
    rng = random.Random(o["seed"])
    table: dict = {}
    met: dict = {}  # state the prior decided -> visits * _VISIT + its choice (ints: nothing for the GC to scan)
    common = dict(table=table, met=met, rng=rng, alpha=o["alpha"], nstep=nstep, lr=lr, prior=o["prior"],
                  phases=o["phases"], discounts=[gamma ** i for i in range(nstep + 2)])

    def evaluate():
        """Greedy schedules of every sample; states met for the first time get their first
        choice (``_episode``), so that the table covers the path it is judged by. Returns each
        sample's batches and its states with their visits."""
        paths = [{} for _ in samples]
        return [run(s, epsilon=0.0, learn=False, visited=p) for s, p in zip(samples, paths)], paths

    def heldout(paths) -> int:
        """Batches of each sample scheduled with only what the table holds for the *other*
        samples' greedy states (and their prefix votes): how the greedy table does on a graph
        it was not fitted to. A table that wins on its samples by choices that do not carry
        over (lattices: a few lucky returns in states seen once) loses here."""
        if len(samples) < 2:
            return 0
        total = 0
        for i, s in enumerate(samples):
            known = {state: table[state] for j, p in enumerate(paths) if j != i for state in p}
            votes = prefix_votes(known, o["phases"]) if o["encoding"] == "sort" else None
            total += len(rollout(s.frontier, chooser(s.encode, s.local, s.ranking, greedy(known), votes)))
        return total

    def greedy_states(paths) -> dict:
        """The table on the states its greedy schedules of the samples visit: the FSM that was
        judged (states met only while exploring hold values from a return or two)."""
        return {state: dict(table[state]) for p in paths for state in p}

    def refine(counts, paths):
        """Exact improvement of the kept FSM (module doc): in the states its greedy schedules
        visit more than once, most visited first, make each other frontier type the greedy
        choice; keep the first change under which no sample takes more batches and together
        they take fewer, and start over. Stops at the lower bound, when no change helps, or
        once its schedules have batched ``refine_nodes`` nodes. Returns the changes kept and the
        greedy schedules' batches and states, as ``evaluate``."""
        spent = kept = 0
        while sum(counts) > bound:
            visits: dict = {}
            for p in paths:
                for state, k in p.items():
                    visits[state] = visits.get(state, 0) + k
            trials = ((state, a) for state, k in sorted(visits.items(), key=lambda sk: -sk[1]) if k > 1
                      for a in sorted(set(split_phase(state, o["phases"])[0]))
                      if not table[state] or a != greedy_act(table[state]))
            for state, a in trials:
                if spent >= o["refine_nodes"] or late():
                    return kept, counts, paths
                q, old = table[state], dict(table[state])
                q[a] = max(q.values(), default=0.0) + 1.0
                new = list(counts)
                for i, s in enumerate(samples):
                    if state in paths[i]:
                        new[i] = run(s, epsilon=0.0, learn=False, limit=counts[i])
                        spent += s.frontier.done
                        if new[i] > counts[i]:
                            break
                if all(n <= c for n, c in zip(new, counts)) and sum(new) < sum(counts):
                    counts, paths = evaluate()
                    kept += 1
                    break
                table[state] = old
            else:
                break
        return kept, counts, paths

    agenda = sum(len(AgendaScheduler().schedule(v)) for v in views)  # a plain frontier: no G^a to keep
    starts = []  # the prior's schedules, then (E_sort) with new states following their twins
    for twins in (None, {}) if o["encoding"] == "sort" else (None,):  # twins: same_types -> first state
        table.clear()
        run = functools.partial(_episode, twins=twins, **common)
        counts, paths = evaluate()
        starts.append((sum(counts), twins, dict(table), counts, paths))
        if sum(counts) <= bound:  # nothing to gain from twins: two rollouts saved
            break
    _, twins, first, counts, paths = min(starts, key=lambda start: start[0])
    table.clear()
    table.update(first)
    run = functools.partial(_episode, twins=twins, **common)
    best = sum(counts)
    best_heldout = heldout(paths) if best > bound else None  # judges tables: none to judge at the bound
    best_episode, stale, episode = 0, 0, 0
    best_table, kept = greedy_states(paths), (counts, paths)
    explored = 0  # nodes batched by the episodes since the last better table
    while episode < episodes and best > bound:
        run(samples[episode % len(samples)], epsilon=epsilon)
        explored += samples[episode % len(samples)].frontier.n
        episode += 1
        if episode % o["check_every"] and episode < episodes and not late():
            continue
        counts, paths = evaluate()
        batches = sum(counts)
        held = heldout(paths) if batches < best else None
        if batches < best and (batches <= bound or held <= min(best_heldout, (1 + CARRY_OVER) * batches)):
            best, best_heldout, best_episode, stale, explored = batches, held, episode, 0, 0
            best_table, kept = greedy_states(paths), (counts, paths)
        else:
            stale += 1
        if late() or (o["patience"] is not None and stale >= o["patience"]) or \
                (o["patience_nodes"] is not None and explored >= o["patience_nodes"]):
            break
    table.clear()
    table.update(best_table)
    if twins is not None:
        twins.clear()
        for state in table:
            twins.setdefault(same_types(state, o["phases"]), state)
    refined, counts, paths = refine(*kept)  # greedy schedules are deterministic: no need to rerun them
    if refined:
        best, best_heldout = sum(counts), heldout(paths)
    best_table = greedy_states(paths)
    best_table.update((state, {code % _VISIT: 0.0}) for state, code in met.items()
                      if code >= RECURRING * _VISIT and state not in best_table)
    stats = dict(episodes=episode, best_episode=best_episode, refined=refined, batches=best, heldout=best_heldout,
                 lower_bound=bound, agenda=agenda, seconds=time.perf_counter() - began, states=len(best_table))
    return Learned(labels, best_table, o, stats)


def _episode(sample: _Sample, table: dict, met: dict, twins: dict | None, rng: random.Random, alpha, epsilon, nstep,
             lr, discounts, prior, phases, learn=True, visited: dict | None = None, limit: int | None = None) -> int:
    """One ε-greedy pass over a sample graph; returns its number of batches (or ``limit`` + 1,
    stopping there). A state met for the first time starts with the greedy choice of the first
    state learned with the same frontier types (``twins``, if given), else with the prior's; the
    Lemma-1 prior's choices and their visits go to ``met``.
    With ``learn``, n-step Q updates: a return stops early at an exploratory step and
    bootstraps from the state before it (Watkins), so that it measures the greedy policy rather
    than the noise of random choices. Values are advantages over ``sample.baseline[t]``, the
    mean return from step t on: a state recurs at many points of a graph (a tree level looks
    like the next), and raw values would compare the times of the visits rather than the
    actions."""
    f, encode, gid, rank, base = sample.frontier, sample.encode, sample.gid, sample.rank, sample.baseline
    f.reset()
    states, actions, rewards = [], [], []
    pending = steps = 0  # steps before ``pending`` have had their update

    def live():
        """The frontier's types (local ids; a gid frontier keeps them as ``order``)."""
        return [sample.local[g] for g in f.order]

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
        if visited is not None:
            visited[state] = visited.get(state, 0) + 1
        q = table.get(state)
        if q is None:
            q = table[state] = {}
            if prior != "optimistic":
                twin = table[twins.setdefault(same_types(state, phases), state)] if twins is not None else None
                if twin:
                    q[greedy_act(twin)] = 0.0
                else:
                    pick = (lambda t: (f.ratio(t), -rank[t])) if prior == "sufficient" else (lambda t: -rank[t])
                    q[gid[max(live(), key=pick)]] = 0.0
                    if prior == "sufficient":  # the agenda prior's choice is the run-time fallback's
                        met.setdefault(state, next(iter(q)))
        code = met.get(state)
        if code is not None:
            met[state] = code + _VISIT
        explore = epsilon and rng.random() < epsilon
        step = len(states)
        if learn and (explore or step - pending >= nstep):
            value = max(q.values(), default=0.0)
            if prior == "optimistic" and len(q) < len(f.order):
                value = max(value, 0.0)  # untried actions count as 0: every reward is negative
            settle(step - 1 if explore else pending, step, value)
        if explore:
            options = [sample.local[g] for g in sorted(f.order)]
            t = options[rng.randrange(len(options))]
        elif prior == "optimistic":
            t = max(live(), key=lambda t: (q.get(gid[t], 0.0), -rank[t]))
        else:
            t = sample.local[greedy_act(q)]
        if learn:
            rewards.append(alpha * f.ratio(t) - 1.0)
            states.append(state)
            actions.append(gid[t])
        f.take(t)
        steps += 1
        if f.done == f.n or (limit is not None and steps > limit):
            break
    end = len(rewards)
    if learn:
        settle(end - 1, end, 0.0)
        togo, returns = 0.0, [0.0] * end
        for i in range(end - 1, -1, -1):
            togo = returns[i] = rewards[i] + discounts[1] * togo
        sample.baseline = [b + 0.5 * (g - b) for g, b in zip(returns, base + [0.0] * (end - len(base)))]
    return steps
