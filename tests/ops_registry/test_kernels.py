"""Every operator's batched kernel equals its eager kernel applied instance by instance, for
each mix of stacked (per-node) and shared (parameter) operands."""
import itertools

import numpy as np
import pytest

from ops_registry import ARRAY, ARRAYS, ATTR, INDEX, REGISTRY

rng = np.random.default_rng(0)
B = 4


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# op name -> list of (operands, attrs); operands: ("a", array) may be stacked or shared,
# ("c", constant) is a Python scalar, ("i", int data per instance), ("t", static attribute)
CASES = {
    **{name: [([("a", f32(3, 4))], {})] for name in
       ["negative", "abs", "exp", "tanh", "sigmoid", "relu", "square", "sin", "cos", "tan", "expm1", "sinh", "cosh",
        "arctan", "arcsinh", "floor", "ceil", "trunc", "sign"]},
    **{name: [([("a", np.tanh(f32(5)) * 0.9)], {})] for name in ["arcsin", "arccos", "arctanh"]},
    **{name: [([("a", np.abs(f32(5)) + 1.5)], {})] for name in ["log2", "log10", "arccosh"]},
    **{name: [([("a", f32(3, 4)), ("a", f32(4))], {}), ([("c", 1.5), ("a", f32(2, 3))], {})]
       for name in ["arctan2", "hypot", "logaddexp"]},
    "log1p": [([("a", np.abs(f32(5)))], {})],
    "clip": [([("a", f32(3, 4)), ("a", f32(4) - 1), ("a", f32(3, 1) + 1)], {}), ([("a", f32(3)), ("c", -0.5), ("c", 0.5)], {})],
    "log": [([("a", np.abs(f32(5)) + 0.5)], {})],
    "sqrt": [([("a", np.abs(f32(2, 3)))], {})],
    **{name: [([("a", f32(3, 4)), ("a", f32(4))], {}), ([("a", f32(3)), ("c", 2.0)], {}),
              ([("c", 1.5), ("a", f32(2, 3))], {}), ([("a", f32(1, 3)), ("a", f32(2, 1))], {})]
       for name in ["add", "subtract", "multiply", "maximum", "minimum", "equal", "not_equal",
                    "less", "less_equal", "greater", "greater_equal"]},
    "divide": [([("a", f32(3)), ("a", np.abs(f32(3)) + 1)], {})],
    "positive": [([("a", f32(3))], {})],
    "invert": [([("a", np.array([True, False, True]))], {}), ([("a", np.arange(-2, 3))], {})],
    "bitwise_and": [([("a", np.array([True, False, True])), ("a", np.array([True, True, False]))], {})],
    "bitwise_or": [([("a", np.arange(4)), ("c", 5)], {})],
    "bitwise_xor": [([("a", np.array([[True], [False]])), ("a", np.array([True, False, True]))], {})],
    "floor_divide": [([("a", f32(3) * 5), ("a", np.abs(f32(3)) + 1)], {}),
                     ([("a", np.arange(-4, 5)), ("c", 3)], {})],
    "remainder": [([("a", f32(2, 3) * 5), ("a", -np.abs(f32(3)) - 1)], {}), ([("c", 7), ("a", np.arange(1, 6))], {})],
    "power": [([("a", np.abs(f32(3)) + 0.1), ("c", 2)], {})],
    "where": [([("a", f32(3) > 0), ("a", f32(3)), ("a", f32(3))], {})],
    "matmul": [([("a", f32(4, 3)), ("a", f32(3))], {}), ([("a", f32(3)), ("a", f32(3, 5))], {}),
               ([("a", f32(3)), ("a", f32(3))], {}), ([("a", f32(2, 4, 3)), ("a", f32(3, 2))], {}),
               ([("a", f32(4, 3)), ("a", f32(3, 2))], {})],
    "concatenate": [([("l", [f32(2), f32(3)])], {"axis": 0}), ([("l", [f32(2, 3), f32(2, 1)])], {"axis": -1})],
    "stack": [([("l", [f32(2), f32(2), f32(2)])], {"axis": 0}), ([("l", [f32(2, 3), f32(2, 3)])], {"axis": 1})],
    "split": [([("a", f32(6)), ("t", 3)], {"axis": 0}), ([("a", f32(2, 4)), ("t", 2)], {"axis": 1})],
    "reshape": [([("a", f32(6)), ("t", (2, 3))], {}), ([("a", f32(2, 3)), ("t", (-1,))], {})],
    "expand_dims": [([("a", f32(2, 3)), ("t", (0, -1))], {}), ([("a", f32(3)), ("t", 1)], {})],
    "squeeze": [([("a", f32(1, 3, 1))], {"axis": None}), ([("a", f32(1, 3, 1))], {"axis": -1})],
    "ravel": [([("a", f32(2, 3))], {})],
    "copy": [([("a", f32(2, 3))], {})],
    "astype": [([("a", f32(2, 3) * 3), ("t", np.int8)], {}), ([("a", f32(4)), ("t", "float64")], {})],
    "broadcast_to": [([("a", f32(3)), ("t", (2, 3))], {}), ([("a", f32(2, 1)), ("t", (4, 2, 3))], {})],
    "repeat": [([("a", f32(2, 3)), ("t", 2)], {"axis": None}), ([("a", f32(2, 3)), ("t", 3)], {"axis": -2})],
    "tile": [([("a", f32(2, 3)), ("t", 2)], {}), ([("a", f32(3)), ("t", (2, 1, 2))], {})],
    "einsum": [([("l", [f32(3, 4), f32(4)])], {"subscripts": "ij,j->i"}), ([("l", [f32(2, 3), f32(2, 3)])], {"subscripts": "ij,ij->i"}),
               ([("l", [f32(2, 3, 4), f32(2, 4)])], {"subscripts": "ijk,ik->ij"}), ([("l", [f32(3), f32(2)])], {"subscripts": "i,j"})],
    "segment_sum": [([("a", f32(4, 3)), ("i", lambda: rng.integers(0, 3, size=4))], {"num_segments": 3}),
                    ([("a", f32(2)), ("i", lambda: rng.integers(-2, 5, size=2))], {"num_segments": 5})],
    "transpose": [([("a", f32(2, 3))], {"axes": None}), ([("a", f32(2, 3, 4))], {"axes": (1, 2, 0)})],
    "sum": [([("a", f32(3, 4))], {"axis": None, "keepdims": False}), ([("a", f32(3, 4))], {"axis": 1, "keepdims": True})],
    "mean": [([("a", f32(3, 4))], {"axis": 0, "keepdims": False})],
    "max": [([("a", f32(3, 4))], {"axis": -1, "keepdims": False})],
    "min": [([("a", f32(3, 4))], {"axis": (0, 1), "keepdims": True})],
    "any": [([("a", f32(3, 4) > 1)], {"axis": 0, "keepdims": False})],
    "all": [([("a", f32(3, 4) > -1)], {"axis": None, "keepdims": True})],
    **{name: [([("a", f32(3, 4))], {"axis": None, "keepdims": False}), ([("a", f32(3, 4))], {"axis": -1, "keepdims": True}),
              ([("a", f32(4))], {"axis": None, "keepdims": True})] for name in ["argmax", "argmin"]},
    "logsumexp": [([("a", f32(3, 4))], {"axis": None, "keepdims": False}), ([("a", f32(3, 4))], {"axis": 0, "keepdims": True})],
    "softmax": [([("a", f32(3, 5))], {"axis": -1}), ([("a", f32(3, 5))], {"axis": 0})],
    "log_softmax": [([("a", f32(5))], {"axis": -1})],
    "take": [([("a", f32(7, 3)), ("i", lambda: int(rng.integers(0, 7)))], {"axis": 0}),
             ([("a", f32(3, 7)), ("i", lambda: int(rng.integers(0, 7)))], {"axis": 1}),
             ([("a", f32(7, 3)), ("i", lambda: rng.integers(0, 7, size=2))], {"axis": 0}),
             ([("a", f32(3, 4)), ("i", lambda: rng.integers(-12, 12, size=(2, 3)))], {"axis": None})],
    "getitem": [([("a", f32(4, 5)), ("t", (slice(1, 3), 2))], {}), ([("a", f32(5)), ("t", (None, slice(None, None, -1)))], {})],
    "affine": [([("a", f32(4, 3)), ("a", f32(3)), ("a", f32(4))], {}),
               ([("a", f32(3)), ("a", f32(3, 5)), ("c", 0.5)], {}),
               ([("a", f32(2, 4, 3)), ("a", f32(3, 2)), ("a", f32(4, 1))], {})],
    "pick_log_softmax": [([("a", f32(5)), ("i", lambda: int(rng.integers(0, 5)))], {"axis": -1}),
                         ([("a", f32(5, 3)), ("i", lambda: rng.integers(0, 5, size=3))], {"axis": 0})],
    "dropout": [([("a", f32(3, 4)), ("i", lambda: int(rng.integers(0, 1 << 32)))], {"rate": 0.5}),
                ([("a", f32(7)), ("i", lambda: int(rng.integers(0, 1 << 32)))], {"rate": 0.1})],
    "pick": [([("a", f32(5)), ("i", lambda: int(rng.integers(0, 5)))], {"axis": -1}),
             ([("a", f32(3, 5)), ("i", lambda: rng.integers(0, 5, size=3))], {"axis": -1})],
}


def test_every_operator_has_cases():
    assert set(CASES) == set(REGISTRY)


def _instances(operands):
    """Per-instance operand values (stackable entries vary per instance)."""
    out = []
    for _ in range(B):
        inst = []
        for kind, v in operands:
            if kind == "a":
                inst.append(v + (rng.standard_normal(v.shape) * 0.1).astype(v.dtype) if v.dtype.kind == "f" else v)
            elif kind == "l":
                inst.append([x + np.float32(rng.standard_normal()) for x in v])
            elif kind == "i":
                inst.append(v())
            else:
                inst.append(v)
        out.append(inst)
    return out


CASE_LIST = [(name, i) for name, cases in CASES.items() for i in range(len(cases))]


@pytest.mark.parametrize("name,case", CASE_LIST, ids=[f"{n}-{i}" for n, i in CASE_LIST])
def test_batched_kernel_equals_eager(name, case):
    op = REGISTRY[name]
    operands, attrs = CASES[name][case]
    kinds = [k for _, k in op.operands]
    arrays = [i for i, (kind, _) in enumerate(operands) if kind == "a"]
    instances = _instances(operands)
    for shared in itertools.product([False, True], repeat=len(arrays)):
        if arrays and all(shared):
            continue
        args, stacked, kw = [], [], dict(attrs)
        for i, ((kind, value), opkind) in enumerate(zip(operands, kinds)):
            if kind == "a":
                is_shared = shared[arrays.index(i)]
                args.append(instances[0][i] if is_shared else np.stack([inst[i] for inst in instances]))
                stacked.append(not is_shared)
            elif kind == "l":
                args.append([np.stack([inst[i][j] for inst in instances]) for j in range(len(value))])
                stacked = [True] * len(value)
            elif kind == "i":
                args.append(np.stack([np.asarray(inst[i]) for inst in instances]))
            elif kind == "c":
                args.append(value)
                stacked.append(False)
            else:
                assert opkind == ATTR
                kw[op.operands[i][0]] = value
        def value(inst, j):  # a shared operand has instance 0's value everywhere
            return instances[0][j] if operands[j][0] == "a" and shared[arrays.index(j)] else inst[j]

        want = [op.eager(np, *[value(inst, j) for j in range(len(inst))], **attrs) for inst in instances]
        got = op.batched(np, tuple(stacked), *args, **kw)
        if op.nout:
            got = [got[:, p] for p in range(op.nout({**attrs, **kw}))]
            want = [np.stack([w[p] for w in want]) for p in range(len(got))]
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_allclose(got, np.stack(want), rtol=1e-5, atol=1e-6)


def test_operand_kinds_are_known():
    for op in REGISTRY.values():
        assert {k for _, k in op.operands} <= {ARRAY, ARRAYS, INDEX, ATTR}, op.name


@pytest.mark.parametrize("name,stacked", [("affine", (False, True, False)), ("affine", (False, True, True)),
                                          ("sigmoid", (True,)), ("add", (True, False)), ("matmul", (False, True))])
def test_kernels_writing_into_out_give_the_same_values(name, stacked):
    """The executor passes ``out=`` (an arena block): in-place kernels must not change values."""
    op = REGISTRY[name]
    operands = [v for kind, v in CASES[name][0][0]]
    args = [np.stack([v * (i + 1) for i in range(B)]) if s else v for v, s in zip(operands, stacked)]
    want = op.batched(np, stacked, *args)
    out = np.full_like(want, np.nan)
    got = op.batched(np, stacked, *args, out=out)
    assert got is out  # these kernels write in place
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("block", [1, 7, 50, 1 << 18])
@pytest.mark.parametrize("width", [1, 6, 64, 65])
def test_pick_log_softmax_rows_in_blocks_equal_eager(monkeypatch, block, width):
    """Classifier losses are reduced a block of rows at a time (bounded temporaries), across
    the block's columns up to ``NARROW`` classes and along its rows above; every block size,
    with a last partial block, and negative labels give each row's eager value."""
    from ops_registry import index
    monkeypatch.setattr(index, "BLOCK", block)
    op = REGISTRY["pick_log_softmax"]
    x = f32(23, width) * 5
    labels = rng.integers(-width, width, size=23)
    before = x.copy()
    got = op.batched(np, (True,), x, labels)
    np.testing.assert_array_equal(x, before)  # a block's scratch is never a view of the logits
    want = [op.eager(np, row, int(label)) for row, label in zip(x, labels)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got.shape == (23,) and got.dtype == np.float32


@pytest.mark.parametrize("with_out", [False, True])
def test_take_rows_of_contiguous_and_strided_sources(with_out):
    from ops_registry.kernels import take_rows
    arena = np.arange(60, dtype=np.float32).reshape(10, 3, 2)
    rows = np.array([7, 0, -1, 7, 3])  # negative rows count from the end, as in numpy
    for source in (arena[:, 1], arena[:, 1].copy(), arena.transpose(1, 0, 2)[1]):
        out = np.empty((5, 2), np.float32) if with_out else None
        got = take_rows(np, source, rows, out=out)
        np.testing.assert_array_equal(got, source[rows])
        assert out is None or got is out


def test_take_rows_checks_bounds_where_nothing_checked_them():
    """Without ``out`` (eager ``take``) a row out of range raises; with ``out``, rows come from
    recording, which checked them (``tests/lazyarray/test_scope.py``: indices out of range)."""
    from ops_registry.kernels import take_rows
    with pytest.raises(IndexError):
        take_rows(np, np.zeros((4, 2), np.float32), np.array([1, 4]))


def test_take_of_a_strided_table_equals_numpy():
    table = np.arange(40, dtype=np.float32).reshape(4, 10).T   # (10, 4), not C-contiguous
    words = np.array([[3], [9], [0]])
    take = REGISTRY["take"]
    np.testing.assert_array_equal(take.batched(np, (False,), table, words, axis=0), table[words])
    np.testing.assert_array_equal(take.eager(np, table, np.array([1, 2]), axis=0), table[[1, 2]])
    np.testing.assert_array_equal(take.batched(np, (False,), table, words), np.take(table, words))
    np.testing.assert_array_equal(take.eager(np, table, np.array([1, 2])), np.take(table, [1, 2]))
