"""The generated stubs' eager fast path (numpy values, no gradient wanted) gives what the generic
``ops.eager`` gives, for every operator: values, dtypes, result types, errors, gradient records."""
import contextlib

import numpy as np
import pytest

import lazyarray as la
import tests.ops_registry.test_kernels as _cases  # every operator's cases
from lazyarray import ops
from lazyarray.array import LazyArray
from ops_registry import REGISTRY, ShapeError

CASES = _cases.CASES
CASE_LIST = [(name, i) for name, cases in CASES.items() for i in range(len(cases))]


def _operands(operands, wrap):
    out = []
    for kind, v in operands:
        if kind == "a":
            out.append(wrap(v))
        elif kind == "l":
            out.append([wrap(x) for x in v])
        elif kind == "i":
            out.append(v())
        else:
            out.append(v)
    return out


def _same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.__class__ is LazyArray and got._value.__class__ is np.ndarray
    assert type(got._scope) is type(want._scope)
    assert got._value.dtype == want._value.dtype and got._value.shape == want._value.shape
    np.testing.assert_array_equal(got._value, want._value)


@pytest.mark.parametrize("form", ["array", "numpy", "parameter, no_grad", "parameter, grad"])
@pytest.mark.parametrize("name,case", CASE_LIST, ids=[f"{n}-{i}" for n, i in CASE_LIST])
def test_the_fast_path_gives_what_eager_gives(name, case, form):
    op = REGISTRY[name]
    operands, attrs = CASES[name][case]
    wrap = {"array": la.array, "numpy": lambda v: v}.get(form, lambda v: la.parameter(v))
    args = _operands(operands, wrap)
    if name == "dropout":       # a seed per call: the same for both
        args[1] = 12345
    with la.no_grad() if form == "parameter, no_grad" else contextlib.nullcontext():
        want = ops.eager(op, tuple(args), attrs)
        got = ops.FUNCTIONS[name](*args, **attrs)
    _same(got, want)


@pytest.mark.parametrize("call", [lambda a, b: a + b, lambda a, b: la.matmul(a, b), lambda a, b: la.stack([a, b]),
                                  lambda a, b: la.take(a, 7, axis=0)])
def test_the_fast_path_words_errors_as_eager_does(call):
    a, b = la.array(np.ones((2, 3), np.float32)), la.array(np.ones((4,), np.float32))
    with pytest.raises((ShapeError, IndexError)) as fast:
        call(a, b)
    assert fast.value.__class__ in (ShapeError, IndexError) and str(fast.value).startswith("la.")


def test_a_zero_d_result_is_an_array_and_views_of_parameters_stay_parameters():
    x = la.array(np.arange(6, dtype=np.float32))
    s = la.sum(x)
    assert s._value.__class__ is np.ndarray and s._value.shape == () and float(s) == 15
    W = la.parameter(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert W.T.is_parameter and la.reshape(W, (3, 2)).is_parameter
    with la.no_grad():
        assert W.T.is_parameter


def test_gradients_flow_through_the_eager_path():
    W = la.parameter(np.arange(6, dtype=np.float64).reshape(2, 3))
    x = la.array(np.array([1.0, 2.0, 3.0]))
    la.sum(la.tanh(W @ x)).backward()
    np.testing.assert_allclose(W.grad, np.outer(1 - np.tanh(W._value @ x._value) ** 2, x._value))


@pytest.mark.parametrize("form", ["array", "parameter, no_grad", "parameter, grad"])
@pytest.mark.parametrize("shape", [(5,), (5, 3), (5, 3, 2)])
@pytest.mark.parametrize("i", [0, 3, -1, -5])
def test_an_integer_index_takes_the_fast_path_as_la_take(form, shape, i):
    value = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    x = la.array(value) if form == "array" else la.parameter(value)
    with la.no_grad() if form == "parameter, no_grad" else contextlib.nullcontext():
        want = ops.eager(REGISTRY["take"], (x, i), {"axis": 0})
        _same(x[i], want)
    assert x[i]._value is not x[i]._value and not np.shares_memory(x[i]._value, value)


def test_an_integer_index_out_of_range_is_worded_by_la_take():
    with pytest.raises(IndexError, match="^la.take"):
        la.array(np.ones((2, 3)))[5]
    with pytest.raises(IndexError, match="0-dimensional"):
        la.array(np.float32(1))[0]
