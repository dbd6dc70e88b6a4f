"""The reference workloads of WORKLOADS.md: data, per-instance models, hand-batched baselines.

    from lazyarray.workloads import WORKLOADS
    w = WORKLOADS["treelstm"]
    params = w.init(H=64)                  # numpy arrays (Params)
    trees = w.data(64, seed=0)             # instances
    lazy = params.lazy()                   # la.parameter versions
    with la.batching() as scope:
        total = w.scope_loss(lazy, trees)  # outside a scope the same call is the eager reference
    w.hand["levels"](params, trees)        # hand-batched numpy, same number
"""
from dataclasses import dataclass, field
from typing import Callable

from . import cell_style, chains, hand_chains, hand_lattices, hand_trees, lattices, trees
from .cells import total
from .params import Params
from .sst import load_sst, sample, sentences, vocabulary

__all__ = ["WORKLOADS", "Workload", "Params", "load_sst", "sample", "sentences", "vocabulary", "vocab_size"]


def vocab_size():
    """Rows of an embedding table: the bundled vocabulary plus id 0 for unknown words."""
    return len(vocabulary()) + 1


@dataclass(frozen=True)
class Workload:
    """One model with its data. `init(H, seed=0)` -> numpy Params; `data(n, seed=0)` -> n
    instances; `loss(lazy_params, instance)` -> LazyArray (a scalar loss, or for Tree-FC and
    Var-LSTM a vector); `hand[form](numpy_params, instances)` -> the scope result in numpy;
    `cells(lazy_params, instance)`: the same loss written with `la.cell`, where there is one."""

    name: str
    title: str
    init: Callable
    data: Callable
    loss: Callable
    hand: dict = field(default_factory=dict)
    cells: Callable | None = None

    def scope_loss(self, params, instances, cells=False):
        """The scope result: the sum of the instances' losses (cell-style code if `cells`)."""
        loss = self.cells if cells else self.loss
        return total([loss(params, x) for x in instances])


def _trees(n, seed=0):
    return sample(load_sst("test"), n, seed)


def _sentences(n, seed=0):
    return sentences(_trees(n, seed))


def _lattices(n, seed=0):
    return lattices.lattices(_trees(n, seed))


def _complete_trees(n, seed=0, k=5):
    return trees.complete_trees(n, k, vocab_size(), seed)


def _with_vocab(init):
    return lambda H, seed=0: init(H, vocab_size(), seed)


WORKLOADS = {w.name: w for w in [
    Workload("treelstm", "TreeLSTM", _with_vocab(trees.treelstm_params), _trees,
             trees.treelstm_loss, {"levels": hand_trees.treelstm}, cell_style.treelstm_loss),
    Workload("treegru", "TreeGRU", _with_vocab(trees.treegru_params), _trees,
             trees.treegru_loss, {"levels": hand_trees.treegru}, cell_style.treegru_loss),
    Workload("treelstm2type", "TreeLSTM-2Type", _with_vocab(trees.treelstm2type_params), _trees,
             trees.treelstm2type_loss, {"levels": hand_trees.treelstm2type}, cell_style.treelstm2type_loss),
    Workload("mvrnn", "MV-RNN", _with_vocab(trees.mvrnn_params), _trees,
             trees.mvrnn_loss, {"levels": hand_trees.mvrnn}, cell_style.mvrnn_loss),
    Workload("treefc", "Tree-FC", _with_vocab(trees.treefc_params), _complete_trees,
             trees.treefc_root, {"levels": hand_trees.treefc}, cell_style.treefc_root_cells),
    Workload("bilstm", "BiLSTM tagger", _with_vocab(chains.bilstm_params), _sentences,
             chains.bilstm_loss, {"sorted": hand_chains.bilstm_sorted,
                                  "padded": hand_chains.bilstm_padded}, cell_style.bilstm_loss),
    Workload("varlstm", "Var-LSTM", _with_vocab(chains.varlstm_params), _sentences,
             chains.varlstm_final, {"sorted": hand_chains.varlstm_sorted}),
    Workload("lstmnmt", "LSTM-NMT", _with_vocab(chains.lstmnmt_params), _sentences,
             chains.lstmnmt_loss, {"sorted": hand_chains.lstmnmt_sorted}),
    Workload("latticelstm", "LatticeLSTM", lattices.latticelstm_params, _lattices,
             lattices.latticelstm_loss, {"steps": hand_lattices.latticelstm}, cell_style.latticelstm_loss),
    Workload("latticegru", "LatticeGRU", lattices.latticegru_params, _lattices,
             lattices.latticegru_loss, {"steps": hand_lattices.latticegru}, cell_style.latticegru_loss),
]}
