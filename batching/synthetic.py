"""Synthetic graphs of ED-Batch's examples, for tests and benchmarks without a model.

``tree_network`` is Fig. 1(a): binary trees of internal nodes ``I`` over leaves ``L``, an output
node ``O`` at every node and a reduction ``R`` per tree. Depth-based batching splits the ``O``
nodes by depth and the agenda batches them early, several times; the optimum batches them once,
after every ``I``. ``swapped_trees`` is Fig. 10 (A.4): each instance is such a tree followed by
one where ``I`` and ``O`` swap roles, so the right choice at frontier {I, O} depends on the phase.
"""
from __future__ import annotations

import random

from .graph import PART_BITS, Graph, SignatureTable


class Builder:
    """Appends nodes to a graph as the recorder does: signature, depth, input references."""

    def __init__(self):
        self.table = SignatureTable()
        self.graph = Graph(self.table)

    def node(self, label: str, inputs=(), heavy: bool = False) -> int:
        """A node of the signature named ``label`` (one arity per label)."""
        g = self.graph
        sig = self.table.intern(label, len(inputs), 0, heavy, label, None)
        g.sig.append(sig)
        g.depth.append(1 + max(g.depth[i] for i in inputs) if inputs else 0)
        g.ins.extend(i << PART_BITS for i in inputs)
        return len(g.sig) - 1


def tree_network(ntrees: int, leaves: int = 8, seed: int = 0) -> Graph:
    """Fig. 1(a) for ``ntrees`` random binary trees of ``leaves`` leaves each."""
    b, rng = Builder(), random.Random(seed)
    for _ in range(ntrees):
        _tree(b, rng, leaves, [b.node("L") for _ in range(leaves)], "I", "O", lambda h: (h,))
    return b.graph


def swapped_trees(ntrees: int, leaves: int = 8, seed: int = 0) -> Graph:
    """Fig. 10: per instance, a Fig. 1 tree, then a tree reading its result whose internal nodes
    have the output type and whose outputs have the internal type (both take two inputs)."""
    b, rng = Builder(), random.Random(seed)
    for _ in range(ntrees):
        first = _tree(b, rng, leaves, [b.node("L") for _ in range(leaves)], "I", "O", lambda h: (h, h))
        _tree(b, rng, leaves, [b.node("L2", (first,)) for _ in range(leaves)], "O", "I", lambda h: (h, h))
    return b.graph


def _tree(b: Builder, rng: random.Random, leaves: int, level: list[int], inner: str, out: str, out_inputs):
    """Merge random adjacent pairs (the shapes of parse trees); an output per node; their sum."""
    outputs = [b.node(out, out_inputs(h)) for h in level]
    while len(level) > 1:
        k = rng.randrange(len(level) - 1)
        h = b.node(inner, (level[k], level[k + 1]))
        level[k:k + 2] = [h]
        outputs.append(b.node(out, out_inputs(h)))
    return b.node(f"R{len(outputs)}", tuple(outputs))
