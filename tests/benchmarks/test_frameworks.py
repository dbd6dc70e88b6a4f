"""The optional PyTorch and DyNet versions compute the eager loss (skipped when not installed)."""
import importlib.util

import numpy as np
import pytest

from lazyarray.workloads.parser import parse

MODELS = ["treelstm", "treefc", "bilstm", "chartagger", "parser", "latticelstm"]

@pytest.mark.parametrize("name", MODELS)
def test_torch_eager_equals_eager(case, assert_same, name):
    torch = pytest.importorskip("torch")
    from benchmarks import torch_eager

    w, params, lazy, instances = case(name)
    with torch.inference_mode():
        value = torch_eager.MODELS[name](torch_eager.tensors(params), instances).numpy()
    assert_same(value, w.scope_loss(lazy, instances))


@pytest.mark.parametrize("name", MODELS)
def test_dynet_autobatch_equals_eager(case, assert_same, name):
    pytest.importorskip("dynet")
    from benchmarks import dynet_autobatch

    w, params, lazy, instances = case(name)
    value = dynet_autobatch.MODELS[name](dynet_autobatch.Model(params), instances)
    assert_same(np.asarray(value), w.scope_loss(lazy, instances))


def test_parsers_take_the_eager_transitions(case, assert_same):
    """PyTorch per sentence, DyNet with the parsers stepped together: the same decisions."""
    _, params, lazy, sentences = case("parser", n=6, seed=2)
    eager = [parse(lazy, s) for s in sentences]
    transitions, losses = [t for t, _ in eager], [float(loss) for _, loss in eager]
    checked = 0
    if importlib.util.find_spec("torch") is not None:
        import torch
        from benchmarks import torch_eager
        with torch.inference_mode():
            p = torch_eager.tensors(params)
            parses = [torch_eager.parse(p, s) for s in sentences]
        assert [t for t, _ in parses] == transitions
        assert_same([float(loss) for _, loss in parses], losses)
        checked += 1
    if importlib.util.find_spec("dynet") is not None:
        from benchmarks import dynet_autobatch
        steps, total = dynet_autobatch.parse(dynet_autobatch.Model(params), sentences)
        assert steps == transitions
        assert_same(total, sum(losses))
        checked += 1
    if not checked:
        pytest.skip("neither torch nor dynet is installed")


def test_importing_dynet_leaves_subnormal_floats_alone():
    """DyNet's -ffast-math build flushes subnormals to zero at import; the baseline restores IEEE
    behaviour, or every later numpy result (and hypothesis's subnormal floats) would change."""
    pytest.importorskip("dynet")
    from benchmarks import dynet_autobatch  # noqa: F401
    tiny = np.float64(2.2250738585072014e-308)
    assert tiny / 2 != 0 and np.nextafter(np.float32(0), np.float32(1)) != 0
