"""ED-Batch §2.3 state encodings of a frontier, over a policy's vocabulary of type labels.

A state is a tuple of ints: vocabulary ids of types (ids follow the sorted labels, so the order
is the same in every process), optionally followed by a phase bucket. Encodings read the order
of types that ``Frontier`` keeps up to date when given the vocabulary ids, so a state costs a
copy of it, not O(nodes) or a sort.
"""
from __future__ import annotations

from .frontier import Frontier

ENCODINGS = ("base", "max", "sort")


def encoder(encoding: str, phases: int = 0):
    """A function Frontier -> state. ``phases`` > 0 appends ``phases * committed // n``
    (ED-Batch A.4: the same frontier types may need different choices early and late in the
    graph)."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; choose from {ENCODINGS}")

    def e_base(f: Frontier):
        """E_base: the set of types on the frontier."""
        return tuple(sorted(f.order))

    def e_max(f: Frontier):
        """E_max: E_base plus the most common type on the frontier."""
        return (*sorted(f.order), f.order[0])

    def e_sort(f: Frontier):
        """E_sort: the frontier's types, most common first."""
        return tuple(f.order)

    encode = {"base": e_base, "max": e_max, "sort": e_sort}[encoding]
    if not phases:
        return encode

    def with_phase(f: Frontier):
        return encode(f) + (phases * f.done // f.n,)

    return with_phase


def split_phase(state: tuple, phases: int) -> tuple[tuple, tuple]:
    """(the state's types, its phase bucket as a 0- or 1-tuple)."""
    return (state[:-1], state[-1:]) if phases else (state, ())


def same_types(state: tuple, phases: int) -> tuple:
    """What states with the same frontier types (in any order) and phase share: where a new
    E_sort state looks for its twin during learning (``qlearning``)."""
    kinds, tail = split_phase(state, phases)
    return frozenset(kinds), tail


def distinct_labels(labels: list[str]) -> list[str]:
    """``labels`` with repeats (distinct signatures that describe alike) told apart in signature
    order: ``label``, ``label#2``, ..."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        k = seen[label] = seen.get(label, 0) + 1
        out.append(label if k == 1 else f"{label}#{k}")
    return out


def vocabulary_ids(vocab: dict[str, int], labels: list[str]) -> list[int]:
    """Vocabulary ids of a view's local types; a label the vocabulary lacks gets a fresh id past
    it (states holding one are unseen, so the scheduler falls back)."""
    fresh = iter(range(len(vocab), len(vocab) + len(labels)))
    return [vocab[key] if key in vocab else next(fresh) for key in distinct_labels(labels)]
