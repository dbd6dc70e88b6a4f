"""Every operator's gradient rule (``OpDef.vjp``) equals central finite differences of its
batched kernel in float64, on random shapes, broadcasting, stacked/shared operands and
attributes; eagerly, ``loss.backward()`` through ``la.<op>`` gives the same finite differences
for parameters and inputs that ask for a gradient. A new operator without a case here fails
``test_every_operator_has_a_gradient_case``."""
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import lazyarray as la
from lazyarray.ops import FUNCTIONS
from ops_registry import ARRAY, ARRAYS, ATTR, INDEX, REGISTRY
from ops_registry.gradients import Rows, no_gradient

#: LAZYARRAY_GRAD_EXAMPLES: examples per operator and test (a longer sweep, e.g. 500)
SETTINGS = settings(max_examples=int(os.environ.get("LAZYARRAY_GRAD_EXAMPLES", 40)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
#: results are integers or bools: no gradient flows through them
INTEGRAL = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
            "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "argmax", "argmin", "any", "all"}
#: integral reductions: one array operand
INTEGRAL_REDUCTIONS = ("argmax", "argmin", "any", "all")
DIFFERENTIABLE = sorted(set(REGISTRY) - INTEGRAL)     # the registry's: a new op without a case fails
UNARY = ("negative", "positive", "abs", "exp", "log", "log1p", "sin", "cos", "sqrt", "square", "tanh", "sigmoid", "relu",
         "tan", "expm1", "log2", "log10", "sinh", "cosh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh",
         "floor", "ceil", "trunc", "sign")
BINARY = ("add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power", "maximum", "minimum",
          "arctan2", "hypot", "logaddexp")


class Case:
    """One batched call of ``name``: ``operands`` as the batched kernel gets them (stacked ones
    with a leading batch axis), ``stacked`` the flags of its ARRAY(S) operands, ``attrs`` (ATTR
    operands, which come last, among them); an INDEX operand is always per node, (B, *shape)."""

    def __init__(self, name, stacked, operands, attrs=None):
        self.name, self.op = name, REGISTRY[name]
        self.stacked, self.operands, self.attrs = tuple(stacked), list(operands), dict(attrs or {})

    def __repr__(self):
        show = [(np.shape(o), getattr(o, "dtype", type(o).__name__)) if not isinstance(o, list)
                else [(np.shape(x), x.dtype) for x in o] for o in self.operands]
        return f"Case({self.name!r}, stacked={self.stacked}, operands={show}, attrs={self.attrs})"

    def flat(self):
        """(path, value) of every ARRAY operand, items of an ARRAYS one by (operand, item)."""
        out = []
        for i, ((_, kind), o) in enumerate(zip(self.op.operands, self.operands)):
            if kind == ARRAYS:
                out += [((i, j), x) for j, x in enumerate(o)]
            elif kind == ARRAY:
                out.append(((i,), o))
        return out

    def forward(self, operands=None):
        with np.errstate(all="ignore"):
            return np.asarray(self.op.batched(np, self.stacked, *(operands or self.operands), **self.attrs))

    def with_value(self, path, value):
        ops = [list(o) if isinstance(o, list) else o for o in self.operands]
        if len(path) == 2:
            ops[path[0]][path[1]] = value
        else:
            ops[path[0]] = value
        return ops

    def flags(self):
        """Per operand: does it vary per node (stacked ARRAY and INDEX operands; an ARRAYS
        operand's items have flags of their own)?"""
        flags, k = [], 0
        for (_, kind), o in zip(self.op.operands, self.operands):
            flags.append(kind == INDEX or kind == ARRAY and self.stacked[k])
            k += kind == ARRAY
        return flags

    def instances(self):
        """Each instance's eager operands: per-node operands by row (a stacked operand of one
        row is every instance's), shared ones as they are."""
        varying = [o for o, f in zip(self.operands, self.flags()) if f]
        varying += [x for o in self.operands if isinstance(o, list) for x, f in zip(o, self.stacked) if f]
        row = lambda x, i: np.asarray(x[i % len(x)])
        return [[[row(x, i) if f else x for x, f in zip(o, self.stacked)] if isinstance(o, list) else
                 row(o, i) if s else o for o, s in zip(self.operands, self.flags())]
                for i in range(max(map(len, varying)))]

    def valid(self):
        """The case as a scope would record it: an instance's operands pass shape inference."""
        try:
            with np.errstate(all="ignore"):
                self.op.infer(*self.instances()[0], **self.attrs)
        except (ValueError, IndexError, TypeError):
            return False
        return True


def differentiable(x):
    return isinstance(x, np.ndarray) and x.dtype.kind == "f"


def pick(items, path):
    """The entry of a per-operand list at an operand path (``Case.flat``)."""
    return items[path[0]] if len(path) == 1 else (items[path[0]] or [None] * (path[1] + 1))[path[1]]


def needs_of(case, wants):
    """``needs`` as the backward passes it: per ARRAY operand, a tuple per ARRAYS operand,
    False for INDEX ones."""
    needs = []
    for (_, kind), o in zip(case.op.operands, case.operands):
        if kind == ARRAYS:
            needs.append(tuple(wants(x) for x in o))
        elif kind == ARRAY:
            needs.append(wants(o))
        else:
            needs.append(False)
    return tuple(needs)


def dense(grad, like):
    return grad.dense(np, like.shape, like.dtype) if isinstance(grad, Rows) else np.asarray(grad)


def central(f, value, eps=1e-6):
    """Central differences of the scalar ``f(v)`` in the entries of ``value``."""
    out = np.zeros(value.shape)
    for idx in np.ndindex(*value.shape):
        total = []
        for d in (eps, -eps):
            v = value.copy()
            v[idx] += d
            total.append(f(v))
        out[idx] = (total[0] - total[1]) / (2 * eps)
    return out


def numeric(case, path, value, R):
    """Central differences of sum(R * result) in the entries of one operand."""
    return central(lambda v: float((case.forward(case.with_value(path, v)) * R).sum()), value)


def close(got, want, rtol):
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=rtol * scale)


def check_rule(case, seed):
    """The rule's gradient of every float operand against finite differences, entry by entry;
    None where ``needs`` says no; the rule leaves its arguments as it found them."""
    rng = np.random.default_rng(seed)
    ans = case.forward()
    assert ans.dtype.kind == "f", case
    R = rng.standard_normal(ans.shape)
    g = R.astype(ans.dtype)
    # some operands want none (a rule of one operand is only called when it wants one)
    skip = {id(o) for _, o in case.flat() if rng.integers(4) == 0} if len(case.flat()) > 1 else set()
    needs = needs_of(case, lambda x: differentiable(x) and id(x) not in skip)
    before = [np.array(o, copy=True) if not isinstance(o, list) else [x.copy() for x in o] for o in case.operands]
    g0, ans0 = g.copy(), ans.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # e.g. a complex gradient cast to a real operand
        grads = case.op.vjp(np, case.stacked, needs, g, ans, *case.operands, **case.attrs)
    np.testing.assert_array_equal(g, g0)
    np.testing.assert_array_equal(ans, ans0)
    for o, b in zip(case.operands, before):
        for x, y in zip(o if isinstance(o, list) else [o], b if isinstance(b, list) else [b]):
            np.testing.assert_array_equal(x, y)
    assert len(grads) == len(case.operands), case
    for path, value in case.flat():
        grad = pick(grads, path)
        if not pick(needs, path):
            assert grad is None, (case, path)
            continue
        grad = dense(grad, value)
        assert grad.shape == value.shape and grad.dtype.kind == "f", (case, path, grad.shape)
        close(grad, numeric(case, path, value, R), 1e-5)
    for (_, kind), grad in zip(case.op.operands, grads):
        if kind == INDEX:
            assert grad is None


# -- drawing cases -------------------------------------------------------------------------------
dims = st.integers(1, 3)


def shapes(lo, hi):
    """Shapes of rank lo..hi, often the highest (where most rules' cases differ)."""
    return st.one_of(st.integers(lo, hi), st.just(hi)).flatmap(lambda r: st.tuples(*[dims] * r))


def data(rng, shape, dtype, name, position):
    """Random values where the op is smooth: away from 0 for log, sqrt, divisors and bases of
    powers; small positive integers for integer operands (divisors, exponents)."""
    if np.dtype(dtype).kind in "iu":
        return rng.integers(1, 4, shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    x = rng.standard_normal(shape)
    if name in ("log", "log1p", "log2", "log10", "sqrt") or name == "power" and position == 0:
        x = np.abs(x) + 0.5
    elif name in ("arcsin", "arccos", "arctanh"):
        x = np.tanh(x) * 0.9
    elif name == "arccosh":
        x = np.abs(x) + 1.5
    elif name == "tan":
        x = np.tanh(x) * 1.2
    elif name == "arctan2" or name == "hypot":
        x = np.sign(x) * (np.abs(x) + 0.5)          # away from the origin
    elif name in ("divide", "floor_divide", "remainder") and position == 1:
        x = np.sign(x) * (np.abs(x) + 0.5)
    return x.astype(dtype)


def batched_shape(stacked, B, shape):
    return (B, *shape) if stacked else shape


@st.composite
def broadcast_operand(draw, out):
    """A shape that broadcasts to ``out``: a suffix of it (lower rank) with some axes of size 1."""
    rank = draw(st.integers(0, len(out)))
    return tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in out[len(out) - rank:])


@st.composite
def elementwise_cases(draw, name):
    """Broadcasting operands, each stacked (maybe one row for the whole batch) or shared (an
    array, a 0-d array or a Python scalar), float64, float32 or int64 (not the operand that is
    surely stacked and float: the batch and the gradient are its)."""
    op = REGISTRY[name]
    n = len(op.operands)
    out = draw(shapes(0, 3))
    B = draw(st.integers(1, 3))
    first = draw(st.integers(name == "where", n - 1))
    stacked = [i == first or draw(st.booleans()) for i in range(n)]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    ties = name in ("maximum", "minimum") and draw(st.booleans())
    operands = []
    for i, s in enumerate(stacked):
        shape = draw(broadcast_operand(out))
        position = i - (name == "where")        # where's condition is not a numeric operand
        if position < 0:
            dtype = np.bool_
        else:
            dtype = draw(st.sampled_from([np.float64, np.float64, np.float32] + [np.int64] * (i != first)))
        if not s and not shape and draw(st.booleans()):     # a Python scalar: a constant
            operands.append(data(rng, (), dtype, name, position).item())
            continue
        rows = 1 if s and i != first and draw(st.integers(0, 4)) == 0 else B
        value = data(rng, batched_shape(s, rows, shape), dtype, name, position)
        if ties and value.dtype.kind == "f":
            value = np.round(value * 2) / 2          # ties between a and b: the gradient is shared
        operands.append(value)
    return Case(name, stacked, operands)


def matmul_shapes(draw):
    """(a's instance shape, b's, stacked flags): ``W @ x_i``, ``x_i @ W`` and numpy's general
    rules (vectors, broadcast batch axes of products of matrices)."""
    m, k, p = draw(dims), draw(dims), draw(dims)
    pattern = draw(st.sampled_from(["Wx", "xW", "general"]))
    if pattern == "Wx":
        return (m, k), (k,), (False, True)
    if pattern == "xW":
        lead = draw(shapes(0, 2))
        return lead + (k,), (k, p), (True, False)
    batch = draw(shapes(0, 2))
    ra, rb = draw(st.integers(1, 2 + len(batch))), draw(st.integers(1, 2 + len(batch)))
    a = (k,) if ra == 1 else draw(broadcast_exact(batch, ra - 2)) + (m, k)
    b = (k,) if rb == 1 else draw(broadcast_exact(batch, rb - 2)) + (k, p)
    sure = draw(st.integers(0, 1))
    return a, b, tuple(i == sure or draw(st.booleans()) for i in range(2))


@st.composite
def broadcast_exact(draw, batch, rank):
    """The last ``rank`` axes of ``batch``, some of them 1."""
    return tuple(1 if draw(st.booleans()) else d for d in batch[len(batch) - rank:]) if rank > 0 else ()


@st.composite
def matmul_cases(draw, name):
    a, b, stacked = matmul_shapes(draw)
    B = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtypes = draw(st.lists(st.sampled_from([np.float64, np.float64, np.float32]), min_size=3, max_size=3))
    operands = [data(rng, batched_shape(s, B, shape), t, name, i)
                for i, (s, shape, t) in enumerate(zip(stacked, (a, b), dtypes))]
    if name == "affine":
        product = np.matmul(np.zeros(a), np.zeros(b)).shape
        s = draw(st.booleans())
        bias = draw(broadcast_operand(product))
        operands.append(data(rng, batched_shape(s, B, bias), dtypes[2], name, 2))
        stacked = (*stacked, s)
    return Case(name, stacked, operands)


@st.composite
def axes(draw, rank):
    """None, an axis (maybe negative) or a tuple of distinct ones."""
    kind = draw(st.sampled_from(["none"] + ["int", "tuple"] * (rank > 0)))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-rank, rank - 1))
    picked = draw(st.lists(st.integers(0, rank - 1), unique=True, min_size=1, max_size=rank))
    return tuple(a - rank if draw(st.booleans()) else a for a in picked)


def stacked_input(draw, shape, name):
    """A float64 or float32 operand of ``shape`` per instance, of one to three instances."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return data(rng, (draw(st.integers(1, 3)), *shape), draw(st.sampled_from([np.float64, np.float32])), name, 0)


@st.composite
def reduction_cases(draw, name):
    shape = draw(shapes(0, 3))
    return Case(name, (True,), [stacked_input(draw, shape, name)],
                {"axis": draw(axes(len(shape))), "keepdims": draw(st.booleans())})


@st.composite
def normalisation_cases(draw, name):
    shape = draw(shapes(1, 3))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return Case(name, (True,), [stacked_input(draw, shape, name)], {"axis": axis})


@st.composite
def join_cases(draw, name):
    """k items, each stacked or shared (at least one stacked), of one shape but along the
    joined axis (concatenate), along an axis that may be negative or None (flattened)."""
    k = draw(st.integers(1, 3))
    rank = draw(st.integers(1 if name == "concatenate" else 0, 2))
    shape = tuple(draw(st.lists(dims, min_size=rank, max_size=rank)))
    if name == "concatenate":
        axis = draw(st.one_of(st.none(), st.integers(-rank, rank - 1)))
    else:
        axis = draw(st.integers(-rank - 1, rank))
    sure = draw(st.integers(0, k - 1))
    stacked = [i == sure or draw(st.booleans()) for i in range(k)]
    B = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    items = []
    for s in stacked:
        item = list(shape)
        if name == "concatenate" and axis is not None:
            item[axis] = draw(dims)
        elif name == "concatenate":
            item = [draw(dims) for _ in range(draw(st.integers(1, 2)))]   # any shapes, flattened
        items.append(data(rng, batched_shape(s, B, tuple(item)),
                          draw(st.sampled_from([np.float64, np.float64, np.float32])), name, 0))
    return Case(name, stacked, [items], {"axis": axis})


@st.composite
def split_cases(draw, name):
    rank = draw(st.integers(1, 3))
    shape = [draw(dims) for _ in range(rank)]
    axis, sections = draw(st.integers(-rank, rank - 1)), draw(dims)
    shape[axis] = sections * draw(st.integers(1, 2))
    return Case(name, (True,), [stacked_input(draw, tuple(shape), name)],
                {"sections": sections, "axis": axis})


@st.composite
def reshape_cases(draw, name):
    shape = draw(shapes(0, 3))
    size = int(np.prod(shape))
    target = []
    while size > 1 or not target and draw(st.booleans()):
        d = draw(st.sampled_from([f for f in range(1, size + 1) if size % f == 0]))
        target.append(d)
        size //= d
        if len(target) == 4:
            break
    target += [1] * draw(st.integers(0, 1))
    if target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    target = target[0] if len(target) == 1 and draw(st.booleans()) else tuple(target)     # an int: 1-d
    return Case(name, (True,), [stacked_input(draw, shape, name)], {"shape": target})


@st.composite
def transpose_cases(draw, name):
    shape = draw(shapes(0, 3))
    perm = draw(st.permutations(range(len(shape))))
    axes_ = None if draw(st.booleans()) else tuple(a - len(shape) if draw(st.booleans()) else a for a in perm)
    return Case(name, (True,), [stacked_input(draw, shape, name)], {"axes": axes_})


@st.composite
def reshaping_cases(draw, name):
    """expand_dims (an axis or a tuple, maybe negative), squeeze (None or some length-1 axes),
    ravel, copy, astype (to float64: finite differences need its precision)."""
    shape = draw(shapes(0, 3))
    if name == "squeeze":
        shape = tuple(1 if draw(st.booleans()) else d for d in shape)
    attrs = {}
    if name == "expand_dims":
        rank = len(shape) + draw(st.integers(1, 2))
        picked = draw(st.lists(st.integers(0, rank - 1), unique=True, min_size=rank - len(shape),
                               max_size=rank - len(shape)))
        axis = tuple(a - rank if draw(st.booleans()) else a for a in picked)
        attrs["axis"] = axis[0] if len(axis) == 1 and draw(st.booleans()) else axis
    elif name == "squeeze":
        ones = [i for i, d in enumerate(shape) if d == 1]
        attrs["axis"] = None if not ones or draw(st.booleans()) else tuple(draw(st.lists(st.sampled_from(ones), unique=True,
                                                                                          min_size=1)))
    elif name == "astype":
        attrs["dtype"] = draw(st.sampled_from([np.float64, "float64", np.dtype(np.float64)]))
    return Case(name, (True,), [stacked_input(draw, shape, name)], attrs)


@st.composite
def broadcast_to_cases(draw, name):
    out = draw(shapes(0, 3))
    target = draw(shapes(0, 2)) + out
    return Case(name, (True,), [stacked_input(draw, draw(broadcast_operand(out)), name)],
                {"shape": target[0] if len(target) == 1 and draw(st.booleans()) else target})


@st.composite
def repeat_cases(draw, name):
    shape = draw(shapes(0, 3))
    axis = draw(st.one_of(st.none(), st.integers(-max(1, len(shape)), max(1, len(shape)) - 1)))
    return Case(name, (True,), [stacked_input(draw, shape, name)], {"repeats": draw(dims), "axis": axis})


@st.composite
def tile_cases(draw, name):
    reps = draw(st.one_of(dims, st.lists(dims, min_size=1, max_size=4).map(tuple)))
    return Case(name, (True,), [stacked_input(draw, draw(shapes(0, 3)), name)], {"reps": reps})


@st.composite
def einsum_cases(draw, name):
    """A contraction models use, each operand stacked or shared (at least one stacked), of
    float64 or float32; letters only one operand has (summed within it) among them."""
    spec = draw(st.sampled_from(["ij,j->i", "ij,jk->ik", "i,j->ij", "i,i->", "ij,ij->i", "ijk,ik->ij", "ij->ji",
                                 "ij->", "ij,k->i", "ij,jk,kl->il", "bij,bj->bi"]))
    sizes = {c: draw(dims) for c in spec if c.isalpha()}
    terms = spec.split("->")[0].split(",")
    sure = draw(st.integers(0, len(terms) - 1))
    stacked = [i == sure or draw(st.booleans()) for i in range(len(terms))]
    B = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    items = [data(rng, batched_shape(s, B, tuple(sizes[c] for c in t)),
                  draw(st.sampled_from([np.float64, np.float64, np.float32])), name, 0) for t, s in zip(terms, stacked)]
    return Case(name, stacked, [items], {"subscripts": spec})


@st.composite
def getitem_cases(draw, name):
    """Basic indices: ints (maybe negative), slices (steps, negative bounds), None, Ellipsis."""
    shape = draw(shapes(1, 3))
    parts, axis = [], 0
    ellipsis = draw(st.booleans())
    while axis < len(shape) and draw(st.integers(0, 3)):
        n = shape[axis]
        kind = draw(st.sampled_from(["int", "slice", "slice", "none"]))
        if kind == "int":
            parts.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            bound = st.one_of(st.none(), st.integers(-n - 1, n + 1))
            parts.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, -1, -2]))))
        else:
            parts.append(None)
            continue
        axis += 1
    if ellipsis:
        parts.insert(draw(st.integers(0, len(parts))), Ellipsis)
    index = parts[0] if len(parts) == 1 and draw(st.booleans()) else tuple(parts)
    case = Case(name, (True,), [stacked_input(draw, shape, name)], {"index": index})
    assume(case.valid() and case.forward().size)      # an Ellipsis may move ints onto shorter axes
    return case


@st.composite
def take_cases(draw, name):
    """A table stacked or shared (``E[w]``), axis None (flattened), an axis or a negative one,
    indices of any shape, negative ones and repeats among them."""
    shape = draw(shapes(0, 3))
    axis = draw(st.one_of(st.none(), st.integers(-max(1, len(shape)), max(1, len(shape)) - 1)))
    n = int(np.prod(shape)) if axis is None or not shape else shape[axis]
    shared = draw(st.booleans())
    B = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    ishape = draw(shapes(0, 2))
    indices = rng.integers(-n, n, (B, *ishape))
    if indices.size > 1 and draw(st.booleans()):
        indices.reshape(-1)[-1] = indices.reshape(-1)[0]          # a repeat
    a = data(rng, batched_shape(not shared, B, shape), draw(st.sampled_from([np.float64, np.float32])), name, 0)
    return Case(name, (not shared,), [a, indices], {"axis": axis})


@st.composite
def pick_cases(draw, name):
    """x stacked or shared; one index per position of the other axes (negative ones too)."""
    shape = draw(shapes(1, 3))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    rest = shape[:axis % len(shape)] + shape[axis % len(shape) + 1:]
    shared = draw(st.booleans())
    B = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = shape[axis]
    index = rng.integers(-n, n, (B, *rest)) if draw(st.booleans()) else rng.integers(0, n, (B, *rest))
    x = data(rng, batched_shape(not shared, B, shape), draw(st.sampled_from([np.float64, np.float32])), name, 0)
    return Case(name, (not shared,), [x, index], {"axis": axis})


@st.composite
def segment_sum_cases(draw, name):
    """values stacked or shared, ids (B, rows) with repeats, negative ids and empty segments."""
    rows, segments = draw(dims), draw(st.integers(1, 4))
    shared = draw(st.booleans())
    B = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = data(rng, batched_shape(not shared, B, (rows, *draw(shapes(0, 2)))),
                  draw(st.sampled_from([np.float64, np.float32])), name, 0)
    return Case(name, (not shared,), [values, rng.integers(-segments, segments, (B, rows))],
                {"num_segments": segments})


@st.composite
def dropout_cases(draw, name):
    """x stacked, one key per call, rates from 0 up (a shared x: see
    ``test_dropout_of_a_shared_weight``)."""
    x = stacked_input(draw, draw(shapes(0, 3)), name)
    keys = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(0, 2**40, len(x))
    return Case(name, (True,), [x, keys], {"rate": draw(st.sampled_from([0.0, 0.25, 0.5, 0.9]))})


CASES = {
    **{name: elementwise_cases for name in UNARY + BINARY + ("where", "clip")},
    "matmul": matmul_cases, "affine": matmul_cases,
    "sum": reduction_cases, "mean": reduction_cases, "max": reduction_cases, "min": reduction_cases,
    "logsumexp": reduction_cases,
    "softmax": normalisation_cases, "log_softmax": normalisation_cases,
    "concatenate": join_cases, "stack": join_cases, "split": split_cases,
    "reshape": reshape_cases, "transpose": transpose_cases, "getitem": getitem_cases,
    **{name: reshaping_cases for name in ("expand_dims", "squeeze", "ravel", "copy", "astype")},
    "broadcast_to": broadcast_to_cases, "repeat": repeat_cases, "tile": tile_cases, "einsum": einsum_cases, "segment_sum": segment_sum_cases,
    "take": take_cases, "pick": pick_cases, "pick_log_softmax": pick_cases, "dropout": dropout_cases,
}


def test_every_operator_has_a_gradient_case():
    """A new operator needs a case here, or must be integral (and declare ``no_gradient``)."""
    assert set(REGISTRY) == set(CASES) | INTEGRAL
    assert not set(CASES) & INTEGRAL
    assert all(kind in (ARRAY, ARRAYS, ATTR, INDEX) for op in REGISTRY.values() for _, kind in op.operands)


@pytest.mark.parametrize("name", sorted(INTEGRAL))
def test_integral_operators_declare_no_gradient(name):
    """Comparisons, bitwise ops and invert give ints or bools: no gradient flows through them,
    and eager mode records nothing for a backward from their results."""
    assert REGISTRY[name].vjp is no_gradient
    with pytest.raises(AssertionError):
        REGISTRY[name].vjp(np, (True,), (True,), None, None, None)
    p = la.parameter(np.array([1.0, -2.0, 3.0]))
    if name == "invert":
        operands = (p > 0,)
    elif name.startswith("bitwise"):
        operands = (p > 0, p < 2)
    elif name in INTEGRAL_REDUCTIONS:
        operands = (p,)
    else:
        operands = (p, 1.0)
    out = getattr(la, name)(*operands)
    assert out.dtype.kind in "biu" and not out.requires_grad


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@SETTINGS
@given(st.data())
def test_rule_equals_finite_differences(name, data_):
    """The rule on a random batched call, in float64, against finite differences; on float32
    operands, equal to its float64 self."""
    case = data_.draw(CASES[name](name), label="case")
    assume(case.valid())
    check_rule(upcast(case), data_.draw(st.integers(0, 2**32 - 1), label="seed"))
    if case.forward().dtype == np.float32:
        same_in_float32(case)


def upcast(case):
    """float32 operands as float64: finite differences need the precision."""
    up = lambda o: o.astype(np.float64) if differentiable(o) else o
    return Case(case.name, case.stacked, [[up(x) for x in o] if isinstance(o, list) else up(o)
                                          for o in case.operands], case.attrs)


def same_in_float32(case):
    """The rule on float32 operands gives float gradients equal to its float64 ones."""
    ans = case.forward()
    g = np.random.default_rng(0).standard_normal(ans.shape)
    needs = needs_of(case, differentiable)
    low = case.op.vjp(np, case.stacked, needs, g.astype(np.float32), ans, *case.operands, **case.attrs)
    wide = upcast(case)
    high = wide.op.vjp(np, wide.stacked, needs, g, wide.forward(), *wide.operands, **wide.attrs)
    for path, value in case.flat():
        if differentiable(value):
            lo = dense(pick(low, path), value)
            assert lo.shape == value.shape and lo.dtype.kind == "f"
            close(lo, dense(pick(high, path), value.astype(np.float64)), 2e-4)


# -- eager mode ----------------------------------------------------------------------------------
def wrap(draw, value, ask):
    """A float array as a parameter or an input that asks for its gradient (``ask``), or as
    any of those, a plain input or a numpy array; anything else as a plain input or as it is."""
    if differentiable(value):
        how = draw(st.sampled_from(["parameter", "grad"] + ["array", "numpy"] * (not ask)))
    else:
        how = draw(st.sampled_from(["array", "numpy"])) if isinstance(value, np.ndarray) else "numpy"
    if how == "parameter":
        return la.parameter(value.copy()), True
    if how == "grad":
        return la.array(value, grad=True), True
    return (la.array(value) if how == "array" else value), False


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@SETTINGS
@given(st.data())
def test_eager_backward_equals_finite_differences(name, data_):
    """``la.<op>`` (the generated function) outside a scope, then ``backward()`` of a weighted
    sum of its result (of some parts of a split): every parameter and input that asked gets
    the finite-difference gradient, of its own shape and dtype."""
    case = data_.draw(CASES[name](name), label="case")
    assume(case.valid())
    values = case.instances()[0]
    floats = [path for path, _ in case.flat() if differentiable(pick(values, path))]
    surely = data_.draw(st.sampled_from(floats), label="asks for sure")
    wrapped, asked = [], []
    for i, ((_, kind), v) in enumerate(zip(case.op.operands, values)):
        if kind == ARRAYS:
            items = [wrap(data_.draw, x, (i, j) == surely) for j, x in enumerate(v)]
            wrapped.append([w for w, _ in items])
            asked += [((i, j), w, x) for j, ((w, a), x) in enumerate(zip(items, v)) if a]
        elif kind == ARRAY:
            w, a = wrap(data_.draw, v, (i,) == surely)
            wrapped.append(w)
            if a:
                asked.append(((i,), w, v))
        else:
            wrapped.append(v)
    out = FUNCTIONS[name](*wrapped, **case.attrs)     # la.<name> (la.dropout draws its own key)
    parts = out if isinstance(out, tuple) else (out,)
    used = [p for p in range(len(parts)) if p == 0 or data_.draw(st.booleans(), label=f"part {p} used")]
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(parts[p].shape) for p in used]
    loss = sum(la.sum(parts[p] * w) for p, w in zip(used, weights))
    loss.backward()

    def f(vals):
        with np.errstate(all="ignore"):
            got = case.op.eager(np, *vals, **case.attrs)
        got = got if isinstance(got, tuple) else (got,)
        return sum(float((np.asarray(got[p], np.float64) * w).sum()) for p, w in zip(used, weights))

    wide = upcast(Case(name, case.stacked, values, case.attrs))
    low = any(x.dtype == np.float32 for _, _, x in asked) or parts[0].dtype == np.float32
    for path, handle, value in asked:
        grad = handle.grad
        assert grad is not None and grad.shape == value.shape and grad.dtype == value.dtype, (path, grad)
        close(grad, central(lambda v: f(wide.with_value(path, v)), pick(wide.operands, path)), 2e-3 if low else 1e-5)


# -- in a scope ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", DIFFERENTIABLE)
@SETTINGS
@given(st.data())
def test_batched_backward_equals_eager(name, data_):
    """The case's instances, each a call of ``la.<op>`` (or of a cell around it) recorded in a
    scope, then ``backward()`` of a weighted sum of every result: shared float operands are
    parameters, stacked ones inputs that ask for their gradient; every gradient equals the
    eager one (which the test above holds to finite differences)."""
    case = data_.draw(CASES[name](name), label="case")
    assume(case.valid())
    per = case.instances()
    in_cell = data_.draw(st.booleans(), label="in a cell")
    if in_cell:     # a body indexes with integer arguments only (an index array would be data)
        assume(all(np.ndim(o) == 0 for (_, kind), o in zip(case.op.operands, per[0]) if kind == INDEX))
        per = [[int(o) if kind == INDEX else o for (_, kind), o in zip(case.op.operands, ops)] for ops in per]
    params = {}

    def handle(x, shared):
        if not differentiable(x):
            return x
        if shared:      # one parameter for every instance
            return params.setdefault(id(x), la.parameter(x))
        return la.array(x, grad=True)

    shared = [[not f for f in case.stacked] if isinstance(o, list) else not s
              for o, s in zip(case.operands, case.flags())]
    constant = [not isinstance(o, (np.ndarray, list)) and kind != INDEX   # Python scalars: in the body
                for (_, kind), o in zip(case.op.operands, per[0])]
    if in_cell:
        def body(*a):
            a = iter(a)
            return FUNCTIONS[name](*[o if c else next(a) for o, c in zip(per[0], constant)], **case.attrs)
        cell = la.cell(body)
        call = lambda *a: cell(*[x for x, c in zip(a, constant) if not c])
    else:
        call = lambda *a: FUNCTIONS[name](*a, **case.attrs)
    rng = np.random.default_rng(data_.draw(st.integers(0, 2**32 - 1), label="seed"))
    weights = []

    def run():
        """(loss, the inputs that asked for a gradient)"""
        terms, inputs = [], []
        for ops in per:
            args = [[handle(x, sh) for x, sh in zip(o, flags)] if isinstance(o, list) else handle(o, flags)
                    for o, flags in zip(ops, shared)]
            inputs += [a for a in (x for o in args for x in (o if isinstance(o, list) else [o]))
                       if isinstance(a, la.LazyArray) and a._ref >= 0]
            out = call(*args)
            for p, part in enumerate(out if isinstance(out, tuple) else (out,)):
                if len(weights) == len(terms):
                    weights.append(rng.standard_normal(part.shape))
                terms.append(la.sum(part * weights[len(terms)]))
        return la.sum(la.stack(terms)), inputs

    def grads(inputs):
        out = []
        for h in list(params.values()) + inputs:
            out.append(None if h.grad is None else np.array(h.grad))
            h.grad = None
        return out

    loss, inputs = run()
    loss.backward()
    want = grads(inputs)
    with la.batching(scheduler=data_.draw(st.sampled_from(["depth", "agenda", "sufficient"]), label="scheduler"),
                     memplan=data_.draw(st.booleans(), label="memplan")):
        loss, inputs = run()
        loss.backward()
    for g, e in zip(grads(inputs), want):
        if e is None or g is None:      # zeros where the loss does not reach (test_backward.py)
            assert not np.any(g) and not np.any(e)
        else:
            assert g.shape == e.shape and g.dtype == e.dtype
            close(g, e, 1e-4 if e.dtype == np.float32 else 1e-9)


def test_dropout_of_a_shared_weight():
    """DropConnect: ``la.dropout(W)`` of a parameter in a scope records one node per call over
    a shared x; each call's mask is that of its key, as eagerly, and the rule matches."""
    W = np.arange(1.0, 7.0).reshape(2, 3)
    keys = np.array([5, 6, 7])
    case = Case("dropout", (False,), [W, keys], {"rate": 0.5})
    want = [REGISTRY["dropout"].eager(np, W, k, rate=0.5) for k in keys]
    np.testing.assert_array_equal(case.forward(), want)
    check_rule(case, 0)


C = 0.3 - 0.8j
COMPLEX = {     # real -> complex -> real: |z| conjugates, holomorphic rules do not, reals take the real part
    "abs(c x + d)": lambda x, d, m: m.abs(x * C + d),
    "abs(exp(c x))": lambda x, d, m: m.abs(m.exp(x * C)),
    "abs(c / x) * d": lambda x, d, m: m.abs(C / x) * d,
    "abs((c x)^2) * x": lambda x, d, m: m.abs(m.square(x * C)) * x,
    "abs(x c) * abs(c - x)": lambda x, d, m: m.abs(x * C) * m.abs(C - x),
    "abs(x ** c)": lambda x, d, m: m.abs(x ** C),
    "abs(tanh(d c) * x)": lambda x, d, m: m.abs(m.tanh(d * C) * x),
}


@pytest.mark.parametrize("name", sorted(COMPLEX))
def test_gradients_through_complex_values_are_real_and_right(name):
    """A real parameter used through complex intermediates gets the real finite-difference
    gradient (it once got the conjugate's: d|c x|/dx = -|c| for c = 1j, then a cast error)."""
    f = COMPLEX[name]
    rng = np.random.default_rng(1)
    x0, d = rng.standard_normal(3) + 2, rng.standard_normal(3)
    p = la.parameter(x0.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        la.sum(f(p, d, la)).backward()
    assert p.grad.dtype == np.float64
    close(p.grad, central(lambda x: float(np.sum(f(x, d, np))), x0), 1e-6)
