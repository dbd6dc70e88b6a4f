"""The reference workloads of WORKLOADS.md: data and per-instance models (op-level and cell-style).

    from lazyarray.workloads import WORKLOADS
    w = WORKLOADS["treelstm"]
    params = w.init(H=64)                  # numpy arrays (Params)
    trees = w.data(64, seed=0)             # instances
    lazy = params.lazy()                   # la.parameter versions
    with la.batching() as scope:
        total = w.scope_loss(lazy, trees)  # outside a scope the same call is the eager reference

The competitors' versions (hand-batched numpy, PyTorch, DyNet) live in the repository's
``benchmarks`` package, outside the installed library.
"""
from dataclasses import dataclass
from typing import Callable

from . import cell_style, chains, lattices, parser, trees
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
    Var-LSTM a vector); `cells(lazy_params, instance)`: the same loss written with `la.cell`,
    where there is one; `forces(instance)`: for a model whose control flow reads values (the
    parser), how many values an instance reads, i.e. the flushes its scope needs under `map`."""

    name: str
    title: str
    init: Callable
    data: Callable
    loss: Callable
    cells: Callable | None = None
    forces: Callable | None = None

    def scope_loss(self, params, instances, cells=False, scope=None):
        """The scope result: the sum of the instances' losses (cell-style code if `cells`); with
        `scope`, each instance runs as a task of `scope.map`, so that values its code reads
        are computed for every instance in one flush."""
        loss = self.cells if cells else self.loss
        if scope is None:
            return total([loss(params, x) for x in instances])
        return total(scope.map(lambda x: loss(params, x), instances))


def _trees(n, seed=0):
    return sample(load_sst("test"), n, seed)


def _sentences(n, seed=0):
    return sentences(_trees(n, seed))


def _char_sentences(n, seed=0):
    return chains.char_sentences(_trees(n, seed))


def _dependencies(n, seed=0):
    return [parser.dependencies(t) for t in _trees(n, seed)]


def _lattices(n, seed=0):
    return lattices.lattices(_trees(n, seed))


def _complete_trees(n, seed=0, k=5):
    return trees.complete_trees(n, k, vocab_size(), seed)


def _with_vocab(init):
    return lambda H, seed=0: init(H, vocab_size(), seed)


WORKLOADS = {w.name: w for w in [
    Workload("treelstm", "TreeLSTM", _with_vocab(trees.treelstm_params), _trees,
             trees.treelstm_loss, cell_style.treelstm_loss),
    Workload("treegru", "TreeGRU", _with_vocab(trees.treegru_params), _trees,
             trees.treegru_loss, cell_style.treegru_loss),
    Workload("treelstm2type", "TreeLSTM-2Type", _with_vocab(trees.treelstm2type_params), _trees,
             trees.treelstm2type_loss, cell_style.treelstm2type_loss),
    Workload("mvrnn", "MV-RNN", _with_vocab(trees.mvrnn_params), _trees,
             trees.mvrnn_loss, cell_style.mvrnn_loss),
    Workload("treefc", "Tree-FC", _with_vocab(trees.treefc_params), _complete_trees,
             trees.treefc_root, cell_style.treefc_root_cells),
    Workload("bilstm", "BiLSTM tagger", _with_vocab(chains.bilstm_params), _sentences,
             chains.bilstm_loss, cell_style.bilstm_loss),
    Workload("varlstm", "Var-LSTM", _with_vocab(chains.varlstm_params), _sentences,
             chains.varlstm_final),
    Workload("lstmnmt", "LSTM-NMT", _with_vocab(chains.lstmnmt_params), _sentences,
             chains.lstmnmt_loss),
    Workload("chartagger", "BiLSTM tagger w/ char", _with_vocab(chains.chartagger_params), _char_sentences,
             chains.chartagger_loss, cell_style.chartagger_loss),
    Workload("parser", "Transition parser", _with_vocab(parser.parser_params), _dependencies,
             parser.parser_loss, cell_style.parser_loss, parser.transitions),
    Workload("latticelstm", "LatticeLSTM", lattices.latticelstm_params, _lattices,
             lattices.latticelstm_loss, cell_style.latticelstm_loss),
    Workload("latticegru", "LatticeGRU", lattices.latticegru_params, _lattices,
             lattices.latticegru_loss, cell_style.latticegru_loss),
]}
