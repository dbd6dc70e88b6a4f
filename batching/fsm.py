"""ED-Batch's FSM scheduler: a learned table from frontier states to the type to batch next.

``learn_policy(views)`` learns one (``qlearning``); ``FSMPolicy.schedule`` costs one table lookup
per batch. In a state learning never saw, an E_sort policy reads the learned states that agree
with it on its most common types: the longest prefix of the state for which learned states
chose one of the prefix's types, and the type most of them chose (``qlearning.prefix_votes``
and ``chooser``; derived from the table, so a policy file needs nothing more); the agenda rule
where no prefix is known, and for the other encodings. So a policy learned on a few samples of
a model runs on any other graph of it. (Op-level lattices: exact frontier states seldom recur
across scopes; the agenda rule there batches about 2x more than the prefix votes.) Policies are
saved as versioned JSON keyed by type labels (never the process-local signature ints).
``FSMScheduler`` is what ``scheduler="fsm"`` names: it learns on the first graph of a model and
reuses the policy.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict

import numpy as np

from .encodings import ENCODINGS, encoder, split_phase, vocabulary_ids
from .frontier import Frontier, agenda_rank, rollout
from .graph import GraphView
from .qlearning import chooser, greedy, prefix_votes, train, unseen

FORMAT = "lazyarray-fsm-policy"
VERSION = 1


class PolicyError(ValueError):
    """A policy file that cannot be read, or a policy used on a graph of another model."""


class FSMPolicy:
    """A learned batching policy; use as ``la.batching(scheduler=policy)``. ``stats`` says how
    learning went (episodes, seconds, batches vs lower bound on the samples)."""

    name = "fsm"

    def __init__(self, labels: list[str], table: dict, encoding: str = "sort", phases: int = 0,
                 stats: dict | None = None):
        self.labels = list(labels)
        self.vocab = {label: i for i, label in enumerate(self.labels)}
        self.table = table
        self.encoding, self.phases = encoding, phases
        self.stats = dict(stats or {})
        self._act = greedy(table)
        self._backoff = prefix_votes(table, phases) if encoding == "sort" else None

    def __repr__(self):
        return (f"FSMPolicy(encoding={self.encoding!r}, phases={self.phases}, types={len(self.labels)}, "
                f"states={len(self.table)})")

    def covers(self, view: GraphView) -> float:
        """Fraction of the view's nodes whose type this policy has seen."""
        known = np.array([g < len(self.labels) for g in vocabulary_ids(self.vocab, view.type_labels)])
        return float(known[view.types].mean()) if len(view) else 1.0

    def schedule(self, view: GraphView) -> list[np.ndarray]:
        if not len(view):
            return []
        gid = vocabulary_ids(self.vocab, view.type_labels)
        if min(gid) >= len(self.labels):
            raise PolicyError(
                f"this policy was learned for other signatures: none of the graph's {view.ntypes} "
                f"types (e.g. {view.type_labels[0]!r}) is among its {len(self.labels)} "
                f"(e.g. {self.labels[0]!r}); learn a policy for this model (la.learn_policy)")
        local = {g: t for t, g in enumerate(gid)}
        frontier, ranking = Frontier(view, gid=gid), lambda: agenda_rank(view)
        if self.encoding == "sort" and not self.phases:
            return sort_rollout(frontier, self._act, local, unseen(local, ranking, self._backoff))
        choose = chooser(encoder(self.encoding, self.phases), local, ranking, self._act, self._backoff, self.phases)
        return rollout(frontier, choose)

    # -- files ----------------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "encoding": self.encoding, "phases": self.phases,
                "labels": self.labels, "stats": self.stats,
                "table": [[list(s), [[a, q] for a, q in sorted(acts.items())]]
                          for s, acts in self.table.items()]}

    def save(self, path):
        """Write the policy as JSON (format, version, encoding, type labels, Q table)."""
        with open(path, "w", encoding="utf-8") as out:
            json.dump(self.to_json(), out)

    @classmethod
    def from_json(cls, doc, where="policy") -> "FSMPolicy":
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise PolicyError(f"{where} is not a lazyarray FSM policy (no format {FORMAT!r})")
        if doc.get("version") != VERSION:
            raise PolicyError(f"{where} has policy format version {doc.get('version')!r}; this "
                              f"lazyarray reads version {VERSION}: learn the policy again")
        try:
            labels, encoding, phases = doc["labels"], doc["encoding"], doc["phases"]
            stats = doc.get("stats")
            if stats is not None and not isinstance(stats, dict):
                raise ValueError(f"stats must be an object, not {type(stats).__name__}")
            if encoding not in ENCODINGS or not isinstance(phases, int) or phases < 0 or \
                    not all(isinstance(label, str) for label in labels) or len(set(labels)) != len(labels):
                raise ValueError("bad encoding, phases or labels")
            table = {}
            for state, acts in doc["table"]:
                state = tuple(state)
                kinds = split_phase(state, phases)[0]
                known = set(kinds)
                if not all(isinstance(g, int) and 0 <= g < len(labels) for g in kinds):
                    raise ValueError(f"state {list(state)} names unknown types")
                table[state] = {int(a): float(q) for a, q in acts}
                if not known.issuperset(table[state]):
                    raise ValueError(f"state {list(state)} takes an action not on its frontier")
        except (KeyError, TypeError, ValueError) as error:
            raise PolicyError(f"{where} is corrupt: {error}") from None
        return cls(labels, table, encoding, phases, stats)


def sort_rollout(frontier: Frontier, act: dict, local: dict, fallback) -> list[np.ndarray]:
    """``rollout`` with ``chooser`` for E_sort without phases written into the loop: the state
    is a copy of the frontier's ``order`` (two calls less per batch)."""
    if frontier.done:
        frontier.reset()
    batches, take, get, order, n = [], frontier.take, act.get, frontier.order, frontier.n
    while frontier.done < n:
        state = tuple(order)
        a = get(state)
        batches.append(take(local[a] if a is not None else fallback(frontier, state)))
    return batches


def load_policy(path) -> FSMPolicy:
    """Read a policy written by ``FSMPolicy.save``."""
    try:
        with open(path, encoding="utf-8") as src:
            doc = json.load(src)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise PolicyError(f"{path} is not a policy file (not JSON: {error})") from None
    return FSMPolicy.from_json(doc, where=str(path))


def learn_policy(views: list[GraphView], **options) -> FSMPolicy:
    """Learn a policy on sample graphs of one model; ``options`` as ``qlearning.train``."""
    learned = train(views, **options)
    return FSMPolicy(learned.labels, learned.table, learned.options["encoding"], learned.options["phases"],
                     learned.stats)


class FSMScheduler:
    """``scheduler="fsm"``: the first graph of a model (no cached policy knows 95% of its nodes'
    types) pays a short learning run on itself; later graphs reuse that policy. Policies are
    shared by all scopes of the process (a small LRU). The run is bounded in nodes batched, not
    seconds, so the policy (and every schedule after) is the same on any machine: 600k nodes
    cost 0.2-0.6 s on trees and chains, ~1.8 s on 130k-node lattices (whose first passes alone
    take that many)."""

    name = "fsm"
    COVERAGE = 0.95
    _cache: OrderedDict = OrderedDict()
    _lock = threading.Lock()
    CAPACITY = 16

    def __init__(self, episodes=100, node_limit=600_000, **options):
        self.options = dict(options, episodes=episodes, node_limit=node_limit)

    def policy(self, view: GraphView) -> FSMPolicy:
        """The cached policy for this view's model, learned on ``view`` if there is none."""
        key = frozenset(view.type_labels)
        with self._lock:
            found = self._cache.get(key)
            if found is None:
                coverage, found = max(((p.covers(view), p) for p in self._cache.values()),
                                      key=lambda cp: cp[0], default=(0.0, None))
                if coverage < self.COVERAGE:
                    found = None
        if found is None:
            found = learn_policy([view], **self.options)
        with self._lock:
            self._cache[key] = found
            self._cache.move_to_end(key)
            while len(self._cache) > self.CAPACITY:
                self._cache.popitem(last=False)
        return found

    def schedule(self, view: GraphView) -> list[np.ndarray]:
        return self.policy(view).schedule(view) if len(view) else []
