"""The optional PyTorch and DyNet versions compute the eager loss (skipped when not installed)."""
import numpy as np
import pytest


@pytest.mark.parametrize("name", ["treelstm", "treefc", "bilstm", "latticelstm"])
def test_torch_eager_equals_eager(case, assert_same, name):
    torch = pytest.importorskip("torch")
    from benchmarks import torch_eager

    w, params, lazy, instances = case(name)
    with torch.inference_mode():
        value = torch_eager.MODELS[name](torch_eager.tensors(params), instances).numpy()
    assert_same(value, w.scope_loss(lazy, instances))


@pytest.mark.parametrize("name", ["treelstm", "treefc", "bilstm", "latticelstm"])
def test_dynet_autobatch_equals_eager(case, assert_same, name):
    pytest.importorskip("dynet")
    from benchmarks import dynet_autobatch

    w, params, lazy, instances = case(name)
    value = dynet_autobatch.MODELS[name](dynet_autobatch.Model(params), instances)
    assert_same(np.asarray(value), w.scope_loss(lazy, instances))
