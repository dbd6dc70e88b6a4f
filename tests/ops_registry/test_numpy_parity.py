"""Every operator means what the numpy function of its name means: same values, shape and dtype
(numpy 2's promotion rules), or an error where numpy raises one. Checked eagerly, and recorded in
a scope with a few instances batched together, on random shapes, dtypes and attributes."""
import warnings

import numpy as np
import pytest
import scipy.special
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazyarray as la

DTYPES = (np.float32, np.float64, np.float16, np.int32, np.int64, np.int8, np.uint8, np.bool_)
UNARY = {"negative": np.negative, "positive": np.positive, "invert": np.invert, "abs": np.abs, "exp": np.exp, "log": np.log,
         "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "sqrt": np.sqrt,
         **{name: getattr(np, name) for name in ("tan", "expm1", "log2", "log10", "sinh", "cosh", "arcsin", "arccos",
                                                 "arctan", "arcsinh", "arccosh", "arctanh", "floor", "ceil", "trunc", "sign")},
         "square": np.square, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0),
         "sigmoid": lambda x: 1 / (1 + np.exp(-x))}
BINARY = ("add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power", "maximum",
          "minimum", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
          "bitwise_and", "bitwise_or", "bitwise_xor", "arctan2", "hypot", "logaddexp")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def arrays(dtype, shape):
    if np.dtype(dtype).kind == "f":
        elements = st.floats(-4, 4, width=16 if np.dtype(dtype).itemsize == 2 else 32, allow_subnormal=False)
    elif np.dtype(dtype).kind == "u":
        elements = st.integers(0, 4)
    elif np.dtype(dtype).kind == "b":
        elements = st.booleans()
    else:
        elements = st.integers(-4, 4)
    return hnp.arrays(dtype, shape, elements=elements)


def same(got, want):
    """Values, shape and dtype of numpy's result (nan where numpy has nan)."""
    got = np.asarray(got)
    assert got.shape == np.shape(want) and got.dtype == np.result_type(want), (got, want)
    tol = max(1e-5, 8 * np.finfo(got.dtype).eps) if got.dtype.kind == "f" else 1e-5   # float16: ~1e-3
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol / 10)


def check(fn, reference, *operands, instances=3):
    """fn over LazyArrays equals reference over numpy arrays eagerly, recorded op by op and
    batched, and as the body of a cell batched over calls, each with every operand per
    instance, then the first and then the last shared (a parameter); where numpy raises, so does lazyarray (a ShapeError,
    IndexError or TypeError) in every mode."""
    cell = la.cell(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = reference(*operands)
        except (ValueError, IndexError, TypeError, OverflowError) as error:
            # numpy's AxisError is both; lazyarray reports a bad axis as a ShapeError (ValueError)
            kind = (ValueError, TypeError) if isinstance(error, (ValueError, TypeError)) else type(error)
            with pytest.raises(kind):
                fn(*map(la.array, operands))
            for run in (fn, cell):
                with la.batching(), pytest.raises(kind):
                    run(*map(la.array, operands))
            return
        same(fn(*map(la.array, operands)), want)
        params = [la.parameter(a) for a in operands]     # operands shared by every instance
        for run in (fn, cell):
            for k in (None, 0, len(operands) - 1):          # none, the first or the last shared
                with la.batching():
                    futures = [run(*(params[j] if j == k else la.array(a) for j, a in enumerate(operands)))
                               for _ in range(instances)]
                for f in futures:
                    same(f, want)


shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


@SETTINGS
@given(st.sampled_from(sorted(UNARY)), st.sampled_from(DTYPES), shapes, st.data())
def test_unary(name, dtype, shape, data):
    # numpy has no sigmoid: compared (with 1 / (1 + exp(-x))) on floats, its dtypes elsewhere ours
    assume(name != "sigmoid" or np.dtype(dtype).kind == "f")
    x = data.draw(arrays(dtype, shape))
    check(getattr(la, name), UNARY[name], x)


@SETTINGS
@given(st.sampled_from(BINARY), st.sampled_from(DTYPES), st.sampled_from(DTYPES),
       hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3), st.data())
def test_binary_with_broadcasting(name, da, db, shapes, data):
    a, b = data.draw(arrays(da, shapes.input_shapes[0])), data.draw(arrays(db, shapes.input_shapes[1]))
    if name == "power" and np.issubdtype(b.dtype, np.integer):
        b = np.abs(b)   # numpy refuses negative integer powers by value: no call can know that
    check(getattr(la, name), getattr(np, name), a, b)


@SETTINGS
@given(st.sampled_from(BINARY[:9]), st.sampled_from(DTYPES[:4]),
       st.one_of(st.integers(-3, 3), st.floats(-3, 3, width=32, allow_subnormal=False), st.booleans()), st.booleans(), st.data())
def test_python_scalars_follow_numpy_promotion(name, dtype, scalar, left, data):
    x = data.draw(arrays(dtype, (3,)))
    # numpy refuses negative integer powers by value, which no call can know before it runs
    assume(not (name == "power" and (left or isinstance(scalar, int) and scalar < 0)))
    op, ref = getattr(la, name), getattr(np, name)
    check((lambda a: op(scalar, a)) if left else (lambda a: op(a, scalar)),
          (lambda a: ref(scalar, a)) if left else (lambda a: ref(a, scalar)), x)


@SETTINGS
@given(st.sampled_from(["sum", "mean", "max", "min", "any", "all"]), st.sampled_from(DTYPES), shapes,
       st.booleans(), st.data())
def test_reductions(name, dtype, shape, keepdims, data):
    x = data.draw(arrays(dtype, shape))
    axes = [None] + list(range(-len(shape), len(shape)))
    if len(shape) >= 2:
        axes.append((0, -1))
    axis = data.draw(st.sampled_from(axes))
    check(lambda a: getattr(la, name)(a, axis=axis, keepdims=keepdims),
          lambda a: getattr(np, name)(a, axis=axis, keepdims=keepdims), x)


@SETTINGS
@given(st.sampled_from(["argmax", "argmin"]), st.sampled_from(DTYPES), shapes, st.booleans(), st.data())
def test_arg_extrema(name, dtype, shape, keepdims, data):
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.sampled_from([None, *range(-len(shape) - 1, len(shape) + 1)]))  # out of range: numpy raises
    check(lambda a: getattr(la, name)(a, axis=axis, keepdims=keepdims),
          lambda a: getattr(np, name)(a, axis=axis, keepdims=keepdims), x)


@SETTINGS
@given(st.sampled_from([np.float32, np.float64, np.float16]), shapes, st.booleans(), st.data())
def test_logsumexp(dtype, shape, keepdims, data):
    x = data.draw(arrays(dtype, shape))
    if data.draw(st.booleans()):
        x[(0,) * len(shape)] = data.draw(st.sampled_from([-np.inf, np.inf]))     # scipy's answers, not nan
    axes = [None] + list(range(-len(shape), len(shape)))
    if len(shape) >= 2:
        axes.append((0, -1))
    axis = data.draw(st.sampled_from(axes))
    # scipy's values in the shape of numpy's reductions (scipy keeps a 0-d operand's dims as (1,))
    check(lambda a: la.logsumexp(a, axis=axis, keepdims=keepdims),
          lambda a: np.reshape(scipy.special.logsumexp(a, axis=axis, keepdims=keepdims),
                               np.shape(np.sum(a, axis=axis, keepdims=keepdims))), x)


@SETTINGS
@given(st.sampled_from(DTYPES[:5]), hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3), st.data())
def test_clip(dtype, shapes, data):
    x, lo, hi = (data.draw(arrays(d, s)) for d, s in zip((dtype, np.float32, dtype), shapes.input_shapes))
    check(la.clip, np.clip, x, lo, hi)
    check(lambda a: la.clip(a, -1, 2.5), lambda a: np.clip(a, -1, 2.5), x)


@SETTINGS
@given(st.sampled_from(["softmax", "log_softmax"]), st.sampled_from([np.float32, np.float64]), shapes, st.data())
def test_softmaxes(name, dtype, shape, data):
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1)) if shape else -1
    check(lambda a: getattr(la, name)(a, axis=axis),
          lambda a: getattr(scipy.special, name)(a, axis=axis), x)


@SETTINGS
@given(st.sampled_from([np.float32, np.float64, np.int64]), st.sampled_from([np.float32, np.float64, np.int32]),
       st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.sampled_from(["mm", "mv", "vm", "vv", "bmm"]),
       st.data())
def test_matmul(da, db, m, k, n, form, data):
    ka = data.draw(st.sampled_from([k, k + 1]))           # sometimes misaligned: numpy raises
    shapes = {"mm": ((m, ka), (k, n)), "mv": ((m, ka), (k,)), "vm": ((ka,), (k, n)),
              "vv": ((ka,), (k,)), "bmm": ((2, m, ka), (k, n))}[form]
    a, b = (data.draw(arrays(d, s)) for d, s in zip((da, db), shapes))
    check(la.matmul, np.matmul, a, b)
    check(lambda x, y: x @ y, np.matmul, a, b)


@SETTINGS
@given(st.sampled_from(DTYPES[:3]), shapes, st.data())
def test_shape_ops(dtype, shape, data):
    x = data.draw(arrays(dtype, shape))
    ndim = len(shape)
    axis = data.draw(st.integers(-ndim - 1, ndim))     # out of range at both ends: numpy raises
    check(lambda a: la.stack([a, a], axis=axis), lambda a: np.stack([a, a], axis=axis), x)
    if ndim:
        axis = data.draw(st.integers(-ndim, ndim - 1))
        check(lambda a: la.concatenate([a, a * 2], axis=axis),
              lambda a: np.concatenate([a, a * 2], axis=axis), x)
        k = data.draw(st.sampled_from([1, 2, 3]))
        k = data.draw(st.sampled_from([k, np.int64(k)]))
        check(lambda a: la.split(a, k, axis=axis)[k - 1], lambda a: np.split(a, k, axis=axis)[k - 1], x)
    check(lambda a: la.concatenate([a, a * 2], axis=None), lambda a: np.concatenate([a, a * 2], axis=None), x)
    perm = tuple(data.draw(st.permutations(range(ndim))))
    check(lambda a: la.transpose(a, perm), lambda a: np.transpose(a, perm), x)
    check(lambda a: la.transpose(a), np.transpose, x)
    check(lambda a: la.reshape(a, (-1,)), lambda a: np.reshape(a, (-1,)), x)
    check(lambda a: la.reshape(a, -1), lambda a: np.reshape(a, -1), x)
    check(lambda a: la.reshape(a, (1, *shape[::-1])), lambda a: np.reshape(a, (1, *shape[::-1])), x)


@SETTINGS
@given(st.sampled_from(DTYPES), shapes, st.data())
def test_more_shape_ops(dtype, shape, data):
    x = data.draw(arrays(dtype, shape))
    ndim = len(shape)
    axis = data.draw(st.integers(-ndim - 2, ndim + 1))       # out of range at both ends: numpy raises
    check(lambda a: la.expand_dims(a, axis), lambda a: np.expand_dims(a, axis), x)
    check(lambda a: la.expand_dims(a, (0, -1)), lambda a: np.expand_dims(a, (0, -1)), x)
    check(la.squeeze, np.squeeze, x)
    one = data.draw(st.sampled_from([None, *range(-ndim, ndim)]))    # an axis of another length: numpy raises
    check(lambda a: la.squeeze(a, one), lambda a: np.squeeze(a, one), x)
    check(la.ravel, np.ravel, x)
    check(lambda a: a.flatten(), lambda a: a.flatten(), x)          # the method, on LazyArrays and ndarrays
    target = data.draw(st.sampled_from([shape, (2,) + shape, (3, 1) + shape, (2,) + shape[1:], (5,)]))
    check(lambda a: la.broadcast_to(a, target), lambda a: np.broadcast_to(a, target), x)
    reps = data.draw(st.integers(0, 3))
    rax = data.draw(st.sampled_from([None, *range(-ndim - 1, ndim + 1)]))
    check(lambda a: la.repeat(a, reps, axis=rax), lambda a: np.repeat(a, reps, axis=rax), x)
    tiles = data.draw(st.one_of(st.integers(1, 3), st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple)))
    check(lambda a: la.tile(a, tiles), lambda a: np.tile(a, tiles), x)
    to = data.draw(st.sampled_from(DTYPES))
    check(lambda a: la.astype(a, to), lambda a: a.astype(to), x)
    check(lambda a: a.astype(to), lambda a: a.astype(to), x)
    check(la.copy, np.copy, x)
    if ndim:
        sax = data.draw(st.integers(-ndim, ndim - 1))
        points = sorted(data.draw(st.lists(st.integers(0, shape[sax] + 1), max_size=3)))
        for k in range(len(points) + 1):
            check(lambda a: la.split(a, points, axis=sax)[k], lambda a: np.split(a, points, axis=sax)[k], x)


#: the contractions models use, implicit forms among them
EINSUMS = ("ij,j->i", "ij,jk->ik", "i,j->ij", "i,i->", "ij,ij->i", "ijk,ik->ij", "bij,bj->bi", "ij->ji", "ij->",
           "ij,jk", "i,i", "ijk,kl->ijl", "ij,jk,kl->il", "ij,k->i", "Ab,b->A")


@SETTINGS
@given(st.sampled_from(EINSUMS), st.data())
def test_einsum(spec, data):
    sizes = {c: data.draw(st.integers(1, 3)) for c in spec if c.isalpha()}
    terms = spec.split("->")[0].split(",")
    ops = [data.draw(arrays(data.draw(st.sampled_from([np.float32, np.float64, np.int32])),
                            tuple(sizes[c] for c in t))) for t in terms]
    if data.draw(st.integers(0, 4)) == 0 and ops[-1].ndim:      # a misaligned axis: numpy raises
        ops[-1] = np.concatenate([ops[-1], ops[-1]], axis=-1)
    check(lambda *a: la.einsum(spec, *a), lambda *a: np.einsum(spec, *a), *ops)


def test_einsum_refuses_what_it_does_not_name_at_the_call():
    x = np.ones((2, 2), np.float32)
    for spec, match in [("...i,i", "ellipsis"), ("ii,i->i", "diagonal"), ("ij,j,k", "names 3 operand"),
                        ("i1,1", "letters")]:
        with pytest.raises(la.ShapeError, match=match):
            la.einsum(spec, x, x[0])
        with la.batching(), pytest.raises(la.ShapeError, match=match):
            la.einsum(spec, la.array(x), la.array(x[0]))


@SETTINGS
@given(st.sampled_from(DTYPES[:5]), shapes, st.integers(0, 4), st.data())
def test_segment_sum(dtype, shape, segments, data):
    """numpy's scatter-add (np.add.at into zeros); ids out of range, or not one per row: an error."""
    x = data.draw(arrays(dtype, shape))
    n = shape[0] if shape else 1
    ids = np.asarray(data.draw(st.lists(st.integers(-segments - 1, segments), min_size=n, max_size=n)), np.int64)

    def reference(a):
        if not np.ndim(a) or len(ids) != len(a):
            raise ValueError("one id per row")
        out = np.zeros((segments,) + a.shape[1:], a.dtype)
        np.add.at(out, ids, a)
        return out

    check(lambda a: la.segment_sum(a, ids, segments), reference, x)


def index_parts(shape):
    part = st.one_of(st.integers(-5, 4), st.none(),
                     st.builds(slice, st.none() | st.integers(-5, 5), st.none() | st.integers(-5, 5),
                               st.none() | st.sampled_from([-2, -1, 1, 2])))
    return st.lists(part, max_size=len(shape) + 1).map(tuple)


@SETTINGS
@given(shapes, st.data())
def test_basic_indexing_and_take(shape, data):
    x = data.draw(arrays(np.float32, shape))
    index = data.draw(index_parts(shape))
    check(lambda a: a[index], lambda a: a[index], x)
    one = index[0] if len(index) == 1 else index        # the function form takes a bare index too
    check(lambda a: la.getitem(a, one), lambda a: a[one], x)
    size = x.size
    i = data.draw(st.integers(-size - 1, size))         # one past either end: numpy raises
    check(lambda a: la.take(a, i), lambda a: np.take(a, i), x)
    if shape:
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        j = data.draw(st.integers(-shape[axis], shape[axis] - 1))
        check(lambda a: la.take(a, j, axis=axis), lambda a: np.take(a, j, axis=axis), x)
        check(lambda a: a[j] if axis == 0 else la.take(a, j, axis=axis), lambda a: np.take(a, j, axis=axis), x)


@SETTINGS
@given(st.sampled_from(DTYPES), st.sampled_from(DTYPES[:2]),
       hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3), st.data())
def test_where(dc, dv, shapes, data):
    c, a, b = (data.draw(arrays(d, s)) for d, s in zip((dc, dv, dv), shapes.input_shapes))
    check(la.where, np.where, c, a, b)


@SETTINGS
@given(st.sampled_from(["zeros", "ones", "full"]), shapes, st.sampled_from((None,) + DTYPES),
       st.one_of(st.integers(-3, 3), st.floats(-3, 3, width=32), st.booleans()), st.data())
def test_creation(name, shape, dtype, fill, data):
    """la.zeros/ones/full and their _like forms: numpy's values, shape and dtype, eagerly and in
    a scope (where they are constants: la.full's docstring)."""
    args = (fill,) if name == "full" else ()
    kw = {} if dtype is None else {"dtype": dtype}
    like = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), shape))
    calls = [(lambda: getattr(la, name)(shape, *args, **kw), lambda: getattr(np, name)(shape, *args, **kw)),
             (lambda: getattr(la, name + "_like")(la.array(like), *args, **kw),
              lambda: getattr(np, name + "_like")(like, *args, **kw))]
    for make, reference in calls:
        try:
            want = reference()
        except OverflowError:       # a fill the dtype cannot hold (-1 as uint8)
            with pytest.raises(OverflowError):
                make()
            with la.batching(), pytest.raises(OverflowError):
                make()
            continue
        same(make(), want)
        with la.batching():
            got = [make() for _ in range(2)]
        for g in got:
            same(g, want)
