"""``LazyArray``: a future (recorded in a scope) or a concrete value (eager result, parameter).

A handle is four slots and nothing else, because recording creates one per op: shape and dtype
live in a shared table of (shape, dtype) classes, the node in the scope's flat graph.
"""
from __future__ import annotations

import itertools
import math
import operator
import threading

import numpy as np

from batching import PART_BITS

NUMPY_INTS = frozenset(np.dtype(c).type for c in np.typecodes["AllInteger"])  # ids read from arrays
NUMPY_SCALARS = frozenset(np.dtype(c).type for c in np.typecodes["All"] if np.dtype(c).kind in "biufc")
_class_ids: dict = {}
_by_dtype: dict = {}    # (shape, dtype object) -> class id, for the common case
CLASSES: list[tuple[tuple[int, ...], np.dtype]] = []
RANK0: set = set()  # ids of the 0-d classes (``x[0]`` of a 0-d x is numpy's IndexError)
_class_lock = threading.Lock()


def class_id(shape, dtype) -> int:
    """Intern a (shape, dtype) class: handles carry one int instead of a tuple and a dtype."""
    try:        # an array's own (shape, dtype): ~0.1 µs, where computing dtype.str costs 0.13
        return _by_dtype[(shape, dtype)]
    except (KeyError, TypeError):
        pass
    dtype = np.dtype(dtype)
    key = (tuple(shape), dtype.str)
    cid = _class_ids.get(key)
    if cid is None:
        check_numeric(dtype)
        with _class_lock:
            cid = _class_ids.setdefault(key, len(CLASSES))
            if cid == len(CLASSES):
                CLASSES.append((key[0], dtype))
                if not key[0]:
                    RANK0.add(cid)
    _by_dtype[(key[0], dtype)] = cid
    return cid


def joins_rows(payload) -> bool:
    """A stack or concatenate of equal-class values along its first axis: its result is
    their rows one after another, so a batch of it can gather them straight into place, or be a
    view of them where they already lie so."""
    op, layout = payload.op, payload.layout
    if op is None or op.gather_view is None or len(layout) != 1 or layout[0][0] != "list":
        return False
    specs = layout[0][1]
    if not all(s[0] == "stacked" and s[2] == specs[0][2] for s in specs):
        return False
    shape, dtype = CLASSES[payload.out_cls]
    return op.gather_view(np.empty((0,) + shape, dtype), len(specs), **payload.attrs) is not None


def scalar_key(a) -> tuple:
    """The signature key of a scalar constant: its type and value, and for a float or complex
    its zeros' signs too (``0.0 == -0.0`` and their hashes agree, but ``x / 0.0`` is inf where
    ``x / -0.0`` is -inf: keyed by value alone, the second call ran the first one's constant);
    NaNs key alike (NaN != NaN would make a new signature per call)."""
    c = a.__class__     # subclasses of float too: a float subclass's -0.0 ran as its 0.0
    if c is float or isinstance(a, (float, np.floating)):
        return (c, "nan" if a != a else a, _copysign(1.0, a))
    if c is complex or isinstance(a, (complex, np.complexfloating)):
        re, im = a.real, a.imag
        return (c, "nan" if re != re else re, _copysign(1.0, re), "nan" if im != im else im, _copysign(1.0, im))
    return c, a


_copysign = math.copysign


def check_numeric(dtype):
    """Objects and strings would pass shape inference (run on dummy zeros) and fail, or compute
    something else, only when the scope runs: refused where they enter."""
    if np.dtype(dtype).kind not in "biufc":
        raise TypeError(f"lazyarray computes on numeric arrays (bool, integer, float, complex), "
                        f"not {np.dtype(dtype)}")


_param_ids = itertools.count(1)
PARAM_NAMES: dict[int, str] = {}


class ScopeError(RuntimeError):
    """A future whose scope failed (or that cannot be used where it was)."""


def handle_source(name: str, scope: str, ref: str, cls: str) -> str:
    """Source that makes a future ``name`` in generated recorders (their namespace binds ``_new``
    to ``object.__new__`` and ``_LA`` to ``LazyArray``): filling the slots of a bare instance is
    ~40 ns cheaper than calling the class, and recording makes one handle per op or output.
    The scope keeps every handle it made (``Scope._finish``: at its exit, those still held
    elsewhere get their own values and let go of the scope)."""
    return (f"{name} = _new(_LA); {name}._scope = {scope}; {name}._ref = {ref}; {name}._cls = {cls}; "
            f"{name}._value = None; {scope}._handles.append({name})")


class LazyArray:
    """An array value that may not be computed yet.

    ``_ref`` >= 0 with ``_scope`` a scope: node reference in that scope's graph (a future).
    ``_ref`` < 0: a parameter (``-_ref`` is its id), shared by every node that uses it;
    ``_scope`` is its gradient state (``grad.leaf.Leaf``).
    ``_ref`` == 0 with ``_value`` set: a concrete value (eager result or ``la.array``);
    ``_scope`` is None, its ``Leaf`` (an input that asked for its gradient) or the eager op
    that computed it from such values (``grad.tape``).
    """

    __slots__ = ("_scope", "_ref", "_cls", "_value", "__weakref__")  # weakref: see _Signatures.watch
    __array_priority__ = 100  # numpy defers to our reflected operators

    def __init__(self, scope, ref, cls, value=None):
        self._scope = scope
        self._ref = ref
        self._cls = cls
        self._value = value

    # -- metadata, known at record time ------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return CLASSES[self._cls][0] if self._cls >= 0 else self._value.shape

    @property
    def dtype(self) -> np.dtype:
        return CLASSES[self._cls][1] if self._cls >= 0 else self._value.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d LazyArray")
        return self.shape[0]

    @property
    def is_parameter(self) -> bool:
        return self._ref < 0

    # -- forcing -----------------------------------------------------------------------------
    def _raw(self):
        """The value on its backend's device; a future runs its scope's recording first."""
        value = self._value
        if value is None:
            value = self._value = self._scope.value(self)
        return value

    def asnumpy(self) -> np.ndarray:
        """The value as a numpy array; inside a scope this runs what was recorded so far."""
        value = self._raw()
        return value if isinstance(value, np.ndarray) else _to_numpy(value)

    def __array__(self, dtype=None, copy=None):
        # numpy 2's protocol: np.array(x) asks for a copy and does not make one itself
        a = self.asnumpy()
        if copy:
            return np.array(a, dtype=dtype, copy=True)
        if copy is False and dtype is not None and a.dtype != dtype:
            raise ValueError(f"a LazyArray of {a.dtype} cannot be read as {np.dtype(dtype)} without a copy")
        return a if dtype is None else a.astype(dtype, copy=False)

    def item(self):
        return self.asnumpy().item()

    def __float__(self):
        return float(self.asnumpy())

    def __int__(self):
        return int(self.asnumpy())

    def __bool__(self):
        return bool(self.asnumpy())

    def __index__(self):
        # numpy's rule, not int(): a float or a 1-element array is no index (never truncated)
        return operator.index(self.asnumpy())

    def tolist(self):
        return self.asnumpy().tolist()

    def to(self, backend: str) -> "LazyArray":
        """This value on another backend ("numpy" or "cupy"): a parameter stays a parameter
        (a new one, with the same name), anything else becomes a concrete array."""
        from .backends import get_backend
        value = get_backend(backend).to_device(self._value if self._value is not None else self.asnumpy())
        if self._ref < 0:
            return new_parameter(value, PARAM_NAMES.get(-self._ref), self._scope.requires_grad)
        return LazyArray(None, 0, -1, value)

    def _peek(self):
        """The value where it is there without running anything (a repr never forces), else None."""
        if self._value is not None:
            return self._value
        scope = self._scope
        done = getattr(scope, "done", None)     # a scope's future (or a fused-away intermediate: None)
        if done is not None and scope.failed is None and scope.executor is not None and self._ref >> PART_BITS < done:
            return scope.executor.value(self._ref)
        return None

    def __repr__(self):
        value = self._peek()
        if value is None:
            return f"LazyArray(future, shape={self.shape}, dtype={self.dtype})"
        body = np.array2string(_to_numpy(value), separator=", ", prefix="LazyArray(")
        name = f", parameter={PARAM_NAMES.get(-self._ref)!r}" if self._ref < 0 else ""
        return f"LazyArray({body}, dtype={self.dtype}{name})"

    def __str__(self):
        value = self._peek()
        return repr(self) if value is None else str(_to_numpy(value))

    def __format__(self, spec):
        """As numpy: a 0-d value formats as its scalar (``f"{loss:.3f}"``: the value, forced);
        an empty spec gives ``str``; other specs on arrays are a TypeError."""
        if not spec:
            return str(self)
        value = self.asnumpy()
        if value.ndim:
            raise TypeError(f"unsupported format string passed to LazyArray.__format__: {spec!r} "
                            f"(only 0-d values take a format spec; this one has shape {value.shape})")
        return format(value.item(), spec)

    def __setitem__(self, index, value):
        raise TypeError("LazyArray does not support item assignment: in a scope a value is a node of the "
                        "recorded graph (build a new one: la.where, la.concatenate); a concrete value can be "
                        "written through x.asnumpy()[...] = ...")

    def __dlpack__(self, **kwargs):
        """Zero-copy hand-off (``torch.from_dlpack(x)``, ``jax.dlpack``) of the value itself,
        on its device; a future runs what its scope recorded first, as forcing does."""
        return self._raw().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._raw().__dlpack_device__()

    __hash__ = object.__hash__  # identity, like torch tensors (== is elementwise)

    # -- copies and pickles: parameter ids and class numbers are process-local ------------------
    def __reduce__(self):
        """A parameter unpickles as a new parameter (its id, kept, named another parameter in
        the loading process, whose weights batched products then ran), anything else as a
        concrete array of its value."""
        if self._ref < 0:
            return new_parameter, (self._value, PARAM_NAMES.get(-self._ref), self._scope.requires_grad)
        return _concrete, (self.asnumpy() if self._value is None else self._value,)

    def __copy__(self):
        """As ``copy.copy`` of an ndarray: a copy of the value (a parameter: a new parameter);
        a future stays a handle of its node, which nothing can write to."""
        if self._ref < 0:
            return new_parameter(self._value.copy(), PARAM_NAMES.get(-self._ref), self._scope.requires_grad)
        if self._value is None:
            return self._scope.handle(self._ref, self._cls)
        return LazyArray(None, 0, -1, self._value.copy())

    def __array_namespace__(self, /, *, api_version=None):
        """The array API standard's namespace of what lazyarray records (``lazyarray.array_api``),
        so ``array_api_compat.array_namespace(x)`` and code written against the standard find it."""
        if api_version not in (None, "2021.12", "2022.12", "2023.12"):
            raise ValueError(f"lazyarray implements the array API 2023.12, not {api_version!r}")
        from . import array_api
        return array_api

    # reshape, transpose, T, __getitem__ and the operators are attached by lazyarray.ops,
    # generated from the operator registry.

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


def _to_numpy(value):
    """Device arrays (cupy) expose ``.get()``; everything else goes through numpy."""
    get = getattr(value, "get", None)
    return get() if callable(get) else np.asarray(value)


def _concrete(value) -> LazyArray:
    return LazyArray(None, 0, -1, value)


def new_parameter(value, name=None, requires_grad=True, base=None, view=None) -> LazyArray:
    """A parameter handle with its gradient state; ``base``/``view``: a view of another
    parameter (its gradient goes to that parameter's, viewed the same way)."""
    from .grad.leaf import Leaf, register
    pid = next(_param_ids)
    PARAM_NAMES[pid] = name or f"p{pid}"
    if base is not None and base.base is not None:     # a view of a view: of the real parameter
        inner, outer = base.view, view
        base, view = base.base, lambda g: outer(inner(g))
    leaf = Leaf(value, requires_grad if base is None else base.requires_grad, base, view)
    register(pid, leaf)
    return LazyArray(leaf, -pid, class_id(value.shape, value.dtype), value)
