"""The generated surface: the .pyi stub, functions, methods and docstrings follow the registry."""
import numpy as np

import lazyarray as la
from lazyarray import stubgen
from ops_registry import REGISTRY


def test_pyi_stub_is_in_sync_with_the_registry():
    assert stubgen.PATH.read_text() == stubgen.render(), "run `python -m lazyarray.stubgen`"


def test_every_operator_is_a_function_with_a_docstring():
    for name, op in REGISTRY.items():
        fn = getattr(la, name)
        assert fn.__doc__.startswith(op.doc)
        for method in op.methods + op.reflected:
            assert callable(getattr(la.LazyArray, method))


def test_operators_and_methods_match_functions():
    x = la.array(np.arange(6, dtype=np.float32))
    y = la.array(np.ones(6, np.float32))
    np.testing.assert_array_equal((2 - x).asnumpy(), 2 - np.arange(6))
    np.testing.assert_array_equal((x @ y).asnumpy(), np.arange(6).sum())
    np.testing.assert_array_equal(x.sum().asnumpy(), 15)
    np.testing.assert_array_equal((-x).asnumpy(), -np.arange(6))
    np.testing.assert_array_equal(x.reshape(2, 3).T.asnumpy(), np.arange(6).reshape(2, 3).T)
    np.testing.assert_array_equal(x.reshape((3, 2)).transpose(1, 0).asnumpy(), np.arange(6).reshape(3, 2).T)
    np.testing.assert_array_equal((x >= 3).asnumpy(), np.arange(6) >= 3)
    assert la.dot is la.matmul
