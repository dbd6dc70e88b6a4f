"""The compiled recording stubs (``lazyarray._recorders``) against the same stubs run as Python
(``ops.PURE``): every operator, with every operand form its stub has a branch for, records the
same nodes (signatures, inputs, depths) and gives the same values, in a scope and eagerly. The
suite as a whole runs on both paths in CI (``LAZYARRAY_PURE_PYTHON=1`` for the pure one)."""
import contextlib
import importlib
import itertools

import numpy as np
import pytest

import lazyarray as la
import tests.ops_registry.test_kernels as _cases  # every operator's cases
from lazyarray import ops, recorders
from lazyarray.array import LazyArray
from ops_registry import REGISTRY

compiled = pytest.mark.skipif(not ops.COMPILED, reason="the compiled recorders are not built here "
                              "(pip install -e . with Cython and a C compiler), or LAZYARRAY_PURE_PYTHON is set")

CASES = _cases.CASES
CASE_LIST = [(name, i) for name, cases in CASES.items() for i in range(len(cases))]
FORMS = ("future", "outside", "parameter", "numpy")


def test_the_pyx_is_the_stubs_of_today():
    """``python -m lazyarray.stubgen`` regenerates it after a change to the registry or to
    ``ops``' generator."""
    assert recorders.PATH.read_text() == recorders.pyx_source(ops.SOURCES), \
        "lazyarray/_recorders.pyx is out of date: run python -m lazyarray.stubgen"


def test_la_compiled_says_which_path_runs():
    assert la.compiled is ops.COMPILED
    assert (ops.FUNCTIONS["tanh"] is ops.PURE["tanh"]) is not ops.COMPILED


def _operands(spec, forms, outside):
    """Operand values of a kernel case, arrays in the given forms (see FORMS)."""
    forms = iter(forms)
    out = []
    for kind, v in spec:
        if kind == "a":
            form = next(forms)
            out.append(la.array(v) if form == "future" else outside(v) if form == "outside"
                       else la.parameter(v) if form == "parameter" else v)
        elif kind == "l":
            out.append([la.array(x) for x in v[:-1]] + [v[-1]])     # futures and a numpy item
        elif kind == "i":
            out.append(v())
        else:
            out.append(v)
    return out


def _graph(scope):
    """The recorded nodes: each signature as (its op, its result class, where it first occurs:
    fresh parameters make fresh signatures), the input slots and the depths."""
    first = {}
    for sig in scope._sig:
        first.setdefault(sig, len(first))
    payload = scope.table.payload
    sigs = [(payload[s].kind, payload[s].op and payload[s].op.name, payload[s].out_cls, first[s]) for s in scope._sig]
    return sigs, list(scope._ins), list(scope._depth)


def _record(fn, spec, attrs, forms, seed):
    """Run ``fn`` in a fresh scope (twice: the second call takes the paths of a known signature)
    and return what it recorded and computed."""
    _cases.rng = np.random.default_rng(seed)    # the same per-call indices for both stubs
    made = {}
    outside = lambda v: made.setdefault(id(v), la.array(v))     # noqa: E731  (a value from before the scope)
    results = []
    with la.batching() as scope:
        for _ in range(2):
            args = _operands(spec, forms, outside)
            results.append(fn(*args, **attrs))
        graph = _graph(scope)
    flat = [r for out in results for r in (out if isinstance(out, tuple) else (out,))]
    return graph, [(r.asnumpy().dtype, r.asnumpy().tolist()) for r in flat]


@compiled
@pytest.mark.parametrize("name,case", CASE_LIST, ids=[f"{n}-{i}" for n, i in CASE_LIST])
def test_compiled_stubs_record_what_the_pure_stubs_record(name, case):
    spec, attrs = CASES[name][case]
    arrays = sum(kind == "a" for kind, _ in spec)
    for forms in itertools.islice(itertools.product(FORMS, repeat=arrays), 16):
        seed = hash((name, case, forms)) & 0xFFFF
        try:
            want = _record(ops.PURE[name], spec, attrs, forms, seed)
        except Exception as error:     # the pure stub refuses this form: so must the compiled one
            with pytest.raises(type(error)):
                _record(ops.FUNCTIONS[name], spec, attrs, forms, seed)
            continue
        got = _record(ops.FUNCTIONS[name], spec, attrs, forms, seed)
        assert got == want, (name, forms)


@compiled
@pytest.mark.parametrize("name,case", CASE_LIST, ids=[f"{n}-{i}" for n, i in CASE_LIST])
def test_compiled_stubs_run_eagerly_as_the_pure_stubs(name, case):
    spec, attrs = CASES[name][case]
    for form, grad in (("future", False), ("parameter", True), ("parameter", False)):
        results = []
        for fn in (ops.PURE[name], ops.FUNCTIONS[name]):
            _cases.rng = np.random.default_rng(7)
            args = _operands(spec, itertools.repeat(form), la.array)
            with contextlib.nullcontext() if grad else la.no_grad():
                out = fn(*args, **attrs)
            flat = out if isinstance(out, tuple) else (out,)
            results.append([(type(r._scope), r._value.dtype, r._value.tolist()) for r in flat])
        assert results[0] == results[1], (name, form)


@compiled
def test_fused_recording_and_reflected_operators_match():
    W, b = la.parameter(np.ones((3, 3), np.float32)), la.parameter(np.ones(3, np.float32))

    def program(matmul, add, multiply):
        with la.batching() as scope:
            x = la.array(np.arange(3, dtype=np.float32))
            y = add(matmul(W, x), b)            # fused into one affine node
            z = multiply(2.0, y)
            w = add(np.float32(1), z)
            graph = _graph(scope)
        return graph, w.asnumpy().tolist()

    pure = program(ops.PURE["matmul"], ops.PURE["add"], ops.PURE["multiply"])
    assert program(ops.FUNCTIONS["matmul"], ops.FUNCTIONS["add"], ops.FUNCTIONS["multiply"]) == pure


# -- cell calls: the compiled recorder (lazyarray._recorders.CellPattern) against the generated one

CELL = importlib.import_module("lazyarray.cell")
H = 4
E = la.parameter(np.random.default_rng(0).standard_normal((9, H)).astype(np.float32), name="E")
GLOBAL_W = la.parameter(np.eye(H, dtype=np.float32), name="GLOBAL_W")


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class _Bundle:
    def __init__(self, seed):
        self.b = la.parameter(f32(H, seed=seed))


def _every_kind():
    """Each argument kind the recorders take (future, value from outside, parameter, Python and
    numpy ints, float/bool/numpy scalar constants, numpy array, static object), ints at and past
    their bounds, bundles and parameters alternating (the memo of two patterns and a third)."""
    bundles = [_Bundle(seed) for seed in range(3)]
    Ms = [la.parameter(f32(H, H, seed=seed)) for seed in (4, 5)]
    outside = la.array(f32(H, seed=6))

    @la.cell
    def body(p, M, h, o, x, i, rate, flag, unused, scale):
        y = (la.tanh(M @ h + o + x + E[i]) * rate + p.b) * scale
        return y * 2.0 if flag else y

    def run():
        h = la.tanh(la.array(f32(H, seed=7)))
        out = []
        for k, (i, rate, flag, unused, scale) in enumerate([
                (1, 0.5, True, 0.0, np.float32(1)), (np.int64(2), 0.5, True, -0.0, np.float32(1)),
                (np.int32(-1), 0.0, False, float("nan"), np.float32(2)), (8, -0.0, True, 0.0, np.float32(1))]):
            for b in (0, 1, 0, 1, 2, 0):
                x = np.full(H, k + b, np.float32)
                out.append(body(bundles[b], Ms[b % 2], h, outside, x, i, rate, flag, unused, scale))
                h = out[-1]
        for bad in (9, -10):        # past the bound: the generic path raises
            with pytest.raises(IndexError):
                body(bundles[0], Ms[0], h, outside, x, bad, 0.5, True, 0.0, np.float32(1))
        out.append(body(bundles[0], Ms[0], np.tanh(x), outside, x, 1, 0.5, True, 0.0, np.float32(1)))  # a second pattern
        return out
    return [body], run


def _nested_multi_output_dropout():
    """Cells returning tuples, calling a cell, drawing dropout keys; two argument counts."""
    @la.cell
    def inner(x, i):
        return la.tanh(x + E[i])

    @la.cell
    def outer(h, c, i):
        y = la.dropout(inner(h, i), 0.5)
        return y, c * y, la.sum(y)

    @la.cell
    def mix(*xs):
        return la.tanh(la.sum(la.stack(list(xs)), axis=0))

    def run():
        h, c = la.tanh(la.array(f32(H, seed=1))), la.array(f32(H, seed=2))
        out = []
        for i in (1, 2, 3, 1):
            h, c, s = outer(h, c, i)
            out += [h, c, s, inner(c, i), mix(h, c), mix(h), mix(h, c, h)]
        return out
    return [inner, outer, mix], run


def _environment():
    """A global parameter rebound and a closed-over scalar changed between calls: each re-traces."""
    scale, other = 1.0, la.parameter(f32(H, H, seed=8))

    @la.cell
    def body(x):
        return la.tanh(GLOBAL_W @ x) * scale

    def run():
        nonlocal scale
        global GLOBAL_W
        first, out = GLOBAL_W, []
        h = la.tanh(la.array(f32(H, seed=3)))
        try:
            for W, s in ((first, 1.0), (first, 2.0), (other, 2.0), (first, 1.0)):
                GLOBAL_W, scale = W, s
                out += [body(h), body(h)]
        finally:
            GLOBAL_W, scale = first, 1.0
        return out
    return [body], run


def _cells_record(program, pure):
    """What ``program``'s fresh cells record (as ``_graph``) and compute in two scopes (the second
    starts with their recorders made and their memos stale), and the calls that took the
    generic path; the recorders compiled, or generated as Python (``pure``)."""
    from lazyarray.scope import Scope
    generic = []
    record_cell = Scope.record_cell
    with pytest.MonkeyPatch.context() as patch:
        if pure:
            patch.setattr(CELL, "_compiled", lambda: None)
        patch.setattr(Scope, "record_cell", lambda self, cell, args: generic.append(cell.name) or record_cell(self, cell, args))
        cells, run = program()
        scopes = []
        for _ in range(2):
            la.manual_seed(0)
            with la.batching() as scope:
                results = run()
                graph = _graph(scope)
            scopes.append((graph, [(r.dtype, r.asnumpy().tolist()) for r in results]))
    return scopes, generic, {type(type(c).__dict__.get("__call__")).__name__ for c in cells}


@compiled
@pytest.mark.parametrize("program", [_every_kind, _nested_multi_output_dropout, _environment])
def test_compiled_cell_recorders_record_what_the_generated_ones_record(program):
    got, got_generic, kinds = _cells_record(program, pure=False)
    want, want_generic, pure_kinds = _cells_record(program, pure=True)
    assert kinds == {"CellCall"} and pure_kinds == {"function"}
    assert got == want
    assert got_generic == want_generic
    assert len(got_generic) < 20    # most calls took the recorders


# -- forcing: the compiled methods (``recorders.FORCING``) against their Python forms

def _forcing_cases():
    """name -> run(): values forced every way a program forces them, in every state a scope
    leaves them (computed, not yet, in a task, failed, tracing, strict, another thread, a part,
    a fused-away value, a read-only view of a join), each outcome a value or the error's words."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(4).astype(np.float32) for _ in range(4)]

    def forced(h):
        out = []
        for force in (np.asarray, lambda h: h.asnumpy(), lambda h: h._raw(), lambda h: np.array(h),
                      lambda h: np.asarray(h, dtype=np.float64), lambda h: h.__array__(np.float64, copy=False),
                      lambda h: h.__array__(copy=True), lambda h: h.sum().item(), lambda h: float(h.sum()),
                      lambda h: int(h.sum()), lambda h: bool(h.sum() > 0), lambda h: h[0].item()):
            try:
                v = force(h)
            except Exception as error:  # noqa: BLE001 - the outcome compared
                out.append((type(error).__name__, str(error)))
            else:
                out.append((type(v).__name__, np.asarray(v).dtype.str, np.asarray(v).tolist(),
                            getattr(v, "flags", None) is not None and v.flags.writeable))
        return out

    def computed():
        with la.batching() as scope:
            t = [la.tanh(x) for x in xs]
            scope.flush()
            return [forced(h) for h in t]

    def pending():
        with la.batching() as scope:
            t = [la.tanh(x) for x in xs]
            out = [forced(t[0])]
            return out + [forced(h) for h in t] + [scope.stats.flushes]

    def in_tasks():
        with la.batching() as scope:
            out = scope.map(lambda x: [float(la.sum(la.tanh(x))), la.tanh(x)[0].item(), bool(la.sum(x) > 0)], xs)
            return out + [scope.stats.flushes]

    def failed():
        out = []
        with pytest.raises(ZeroDivisionError):
            with la.batching():
                t = la.tanh(xs[0])
                u = la.tanh(xs[1])
                out.append(forced(t))
                raise ZeroDivisionError("stop")
        return out + [forced(u), forced(t)]

    def strict():
        out = []
        with la.batching(strict=True):
            t = la.tanh(xs[0])
            out.append(forced(t))
        return out

    def tracing():
        @la.cell
        def reads(x):
            return x * float(la.sum(x))
        with pytest.raises(Exception) as error, la.batching():
            reads(la.tanh(xs[0]))
        return [type(error.value).__name__, str(error.value)]

    def other_thread():
        import threading
        with la.batching() as scope:
            t = [la.tanh(x) for x in xs]
            scope.flush()
            u = la.exp(xs[0])
            out = []
            worker = threading.Thread(target=lambda: out.extend([forced(t[1]), forced(u)]))
            worker.start()
            worker.join()
        return out

    def parts_and_fused():
        W = la.parameter(rng.standard_normal((4, 4)).astype(np.float32))
        with la.batching() as scope:
            a, b = la.split(la.tanh(xs[0]), 2)
            h = W @ xs[1]
            y = h + 1.0     # fuses h's product away
            scope.flush()
            return [forced(a), forced(b), forced(h), forced(y)]

    def joined():
        with la.batching():
            parts = [la.split(la.tanh(x), 2) for x in xs]
            out = [la.stack([parts[0][0], parts[1][0]]), la.stack([parts[2][0], parts[3][0]])]
            return [forced(parts[0][1]), forced(parts[0][0]), forced(out[0])]

    def concrete():
        p = la.parameter(xs[0])
        return [forced(la.array(xs[1])), forced(p), forced(la.tanh(xs[2]))]

    return {f.__name__: f for f in (computed, pending, in_tasks, failed, strict, tracing, other_thread,
                                    parts_and_fused, joined, concrete)}


@compiled
@pytest.mark.parametrize("case", list(_forcing_cases()))
def test_compiled_forcing_forces_as_the_python_methods_do(case):
    from lazyarray.executor import Executor
    assert LazyArray.__array__ is not ops.PURE_FORCING["__array__"]
    got = _forcing_cases()[case]()
    with pytest.MonkeyPatch.context() as patch:
        for name, fn in ops.PURE_FORCING.items():
            patch.setattr(*(Executor, "value") if name == "Executor.value" else (LazyArray, name), fn)
        want = _forcing_cases()[case]()
    assert got == want


def _outcome(fn, *args):
    """What a call gives: each result's kind (its _scope's type), dtype and value, or the error."""
    try:
        out = fn(*args)
    except Exception as error:
        return type(error), str(error)
    return type(out._scope), out.asnumpy().dtype, out.asnumpy().tolist()


INDEXED = {"vector": np.arange(5, dtype=np.float32), "matrix": f32(5, 3), "0-d": np.float32(2)}
INDICES = [3, -1, 9, np.int64(2), True, [0, 2], np.array([4, 1]), [True, False] * 2 + [True], slice(1, 3), (1, 0)]


@compiled
@pytest.mark.parametrize("mode", ["no_grad", "grad", "scope"])
@pytest.mark.parametrize("form", ["array", "parameter"])
@pytest.mark.parametrize("value", list(INDEXED))
def test_compiled_indexing_gives_what_the_pure_stub_gives(mode, form, value):
    """``x[i]`` (``LazyArray.__getitem__``: the compiled ``index`` stub) and ``ops.PURE['index']``,
    eagerly with and without gradients and in a scope, for every index kind and its errors."""
    assert LazyArray.__getitem__ is not ops.PURE["index"]
    make = la.array if form == "array" else la.parameter
    for i in INDICES:
        got, want = [], []
        for fn, out in ((LazyArray.__getitem__, got), (ops.PURE["index"], want)):
            x = make(INDEXED[value])
            with la.no_grad() if mode == "no_grad" else la.batching() if mode == "scope" else contextlib.nullcontext():
                out.append(_outcome(fn, x, i))
        assert got == want, i


@compiled
@pytest.mark.parametrize("name", sorted(n for n in ops.PURE if n.startswith("reflected_")))
def test_compiled_reflected_operators_give_what_the_pure_stubs_give(name):
    """``2 - x`` and friends: the compiled stubs (``LazyArray.__rsub__``...) against the pure."""
    op = REGISTRY[name.removeprefix("reflected_")]
    method = getattr(LazyArray, op.reflected[0])
    assert method is not ops.PURE[name]
    for mode in ("no_grad", "grad", "scope"):
        for other in (2, 1.5, np.float32(3), np.arange(1, 4, dtype=np.int32)):
            outcomes = []
            for fn in (method, ops.PURE[name]):
                x = (la.parameter if mode == "grad" else la.array)(np.arange(1, 4, dtype=np.float32))
                with la.no_grad() if mode == "no_grad" else la.batching() if mode == "scope" else contextlib.nullcontext():
                    outcomes.append(_outcome(fn, x, other))
            assert outcomes[0] == outcomes[1], (mode, other)
