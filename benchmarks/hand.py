"""The hand-batched numpy baselines of each reference workload: ``HAND[name][form](numpy_params,
instances)`` computes what ``WORKLOADS[name].scope_loss`` computes for the same instances."""
from . import hand_chains, hand_lattices, hand_parser, hand_trees

__all__ = ["HAND"]

HAND = {
    "treelstm": {"levels": hand_trees.treelstm},
    "treegru": {"levels": hand_trees.treegru},
    "treelstm2type": {"levels": hand_trees.treelstm2type},
    "mvrnn": {"levels": hand_trees.mvrnn},
    "treefc": {"levels": hand_trees.treefc},
    "bilstm": {"sorted": hand_chains.bilstm_sorted, "padded": hand_chains.bilstm_padded},
    "varlstm": {"sorted": hand_chains.varlstm_sorted},
    "lstmnmt": {"sorted": hand_chains.lstmnmt_sorted},
    "chartagger": {"sorted": hand_chains.chartagger_sorted},
    "parser": {"lock-step": hand_parser.parser_loss},
    "latticelstm": {"steps": hand_lattices.latticelstm},
    "latticegru": {"steps": hand_lattices.latticegru},
}
