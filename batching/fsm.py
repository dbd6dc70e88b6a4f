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
import math
import os
import sys
import threading
from collections import OrderedDict

import numpy as np

from .encodings import ENCODINGS, encoder, split_phase, vocabulary_ids
from .frontier import Frontier, agenda_rank, rollout
from .graph import GraphView
from .qlearning import chooser, greedy, prefix_votes, train, unseen

FORMAT = "lazyarray-fsm-policy"
VERSION = 1
FIELDS = frozenset(("format", "version", "encoding", "phases", "labels", "stats", "table"))
#: The largest policy file ``load_policy`` reads, in bytes: about 300,000 states of 8 types.
#: Learned policies take kilobytes (an op-level lattice model's 3,600 states: 140 kB); loading
#: holds about 22 times the file's size at its peak (the parsed JSON, then the Q table).
MAX_BYTES = 16 << 20


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
        choose = chooser(encoder(self.encoding, self.phases), local, ranking, self._act, self._backoff)
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
        """The policy a ``to_json`` document describes; ``PolicyError`` naming the first thing
        that is not as ``to_json`` writes it."""
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise PolicyError(f"{where} is not a lazyarray FSM policy (no format {FORMAT!r})")
        version = doc.get("version")
        if type(version) is not int or version != VERSION:
            raise PolicyError(f"{where} has policy format version {version!r}; this "
                              f"lazyarray reads version {VERSION}: learn the policy again")
        try:
            unknown = set(doc) - FIELDS
            if unknown:
                raise ValueError(f"unknown fields {sorted(unknown)}")
            missing = FIELDS - {"stats"} - set(doc)
            if missing:
                raise ValueError(f"no {sorted(missing)}")
            labels, encoding, phases, stats = doc["labels"], doc["encoding"], doc["phases"], doc.get("stats")
            if stats is not None and (not isinstance(stats, dict) or not all(
                    value is None or type(value) in (bool, int, float, str) for value in stats.values())):
                raise ValueError("stats must be an object of numbers, strings or nulls")
            if type(encoding) is not str or encoding not in ENCODINGS:
                raise ValueError(f"encoding {encoding!r} is none of {list(ENCODINGS)}")
            if type(phases) is not int or phases < 0:
                raise ValueError(f"phases {phases!r} is not a count")
            if type(labels) is not list or not labels or not all(type(label) is str for label in labels):
                raise ValueError("labels must be a non-empty list of strings")
            if len(set(labels)) != len(labels):
                raise ValueError("labels repeat")
            table = _read_table(doc["table"], len(labels), encoding, phases)
        except ValueError as error:
            raise PolicyError(f"{where} is corrupt: {error}") from None
        return cls(labels, table, encoding, phases, stats)


def _read_table(entries, ntypes: int, encoding: str, phases: int) -> dict:
    """``to_json``'s table entries ([state, [[action, q], ...]]) -> the Q
    table; ValueError naming the first entry that is not one: a state is a non-empty list of
    type ids as the encoding orders them (then a phase bucket, with phases), an action one of
    its types, once, and q a finite number."""
    if type(entries) is not list:
        raise ValueError("table must be a list")
    table: dict = {}
    for i, entry in enumerate(entries):
        if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not list or type(entry[1]) is not list:
            raise ValueError(f"table entry {i} is not a [state, actions] pair")
        state, acts = tuple(entry[0]), entry[1]
        kinds, tail = split_phase(state, phases)
        if not kinds:
            raise ValueError(f"table entry {i}: state {list(state)} has no types")
        if not all(type(g) is int and 0 <= g < ntypes for g in kinds):
            raise ValueError(f"table entry {i}: state {list(state)[:20]} names unknown types")
        if not _ordered(kinds, encoding):
            raise ValueError(f"table entry {i}: state {list(state)[:20]} is not an E_{encoding} state")
        if tail and not (type(tail[0]) is int and 0 <= tail[0] < phases):
            raise ValueError(f"table entry {i}: phase {tail[0]!r} is not one of {phases}")
        if state in table:
            raise ValueError(f"table entry {i}: state {list(state)[:20]} is listed twice")
        q = table[state] = {}
        for pair in acts:
            if type(pair) is not list or len(pair) != 2:
                raise ValueError(f"table entry {i}: {pair!r:.40} is not an [action, value] pair")
            a, value = pair
            if type(a) is not int or a not in kinds:
                raise ValueError(f"table entry {i}: action {a!r:.40} is not a type of its state")
            if a in q:
                raise ValueError(f"table entry {i}: action {a} is listed twice")
            # compared, not converted: float() of a huge int overflows, and NaN fails both
            if type(value) not in (int, float) or not -sys.float_info.max <= value <= sys.float_info.max:
                raise ValueError(f"table entry {i}: value {value!r:.40} of action {a} is not a finite number")
            q[a] = float(value)
    return table


def _ordered(kinds: tuple, encoding: str) -> bool:
    """Whether ``kinds`` is a state's types as ``encodings`` writes them: distinct (E_sort),
    ascending (E_base), ascending then the most common again (E_max)."""
    if encoding == "sort":
        return len(set(kinds)) == len(kinds)
    ascending = kinds[:-1] if encoding == "max" else kinds
    return all(a < b for a, b in zip(ascending, ascending[1:])) and (encoding == "base" or kinds[-1] in ascending)


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
    """Read a policy written by ``FSMPolicy.save``. ``PolicyError`` for a file that is not one,
    in any way (not JSON, nested deeper than one, numbers out of range, a state or value that
    no learning writes), or is larger than ``MAX_BYTES``, which is checked before anything is
    read: a policy file can come from anywhere, and one of 55 MB once took 4.5 GB to load.
    ``OSError`` where the file cannot be read."""
    too_big = PolicyError(f"{path} is larger than a policy file may be (batching.fsm.MAX_BYTES: {MAX_BYTES} bytes)")
    with open(path, "rb") as src:
        if os.fstat(src.fileno()).st_size > MAX_BYTES:
            raise too_big
        data = src.read(MAX_BYTES + 1)  # a file fstat does not size (a pipe) or one still growing
    if len(data) > MAX_BYTES:
        raise too_big
    try:
        doc = json.loads(str(data, "utf-8"), parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as error:
        raise PolicyError(f"{path} is not a policy file (not JSON: {error})") from None
    except UnicodeDecodeError as error:
        raise PolicyError(f"{path} is not a policy file (not UTF-8 JSON: {error})") from None
    except ValueError as error:
        raise PolicyError(f"{path} is corrupt: {error}") from None
    except RecursionError:
        raise PolicyError(f"{path} is corrupt: nested deeper than any policy file") from None
    del data
    return FSMPolicy.from_json(doc, where=str(path))


def _int(text: str) -> int:
    if len(text) > 19:  # a type id, phase or count needs no more; int() of thousands of digits is slow
        raise ValueError(f"integer of {len(text)} digits")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text:.40} is out of range")
    return value


def _constant(name: str):
    raise ValueError(f"{name} is not a number")


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
