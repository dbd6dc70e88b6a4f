"""Weight arrangement inside cell bodies (ED-Batch §3, Table 2: "the better arrangement of the
weight parameters").

A body that writes its gates with separate weights, ``i = sigmoid(W_i @ x + b_i)``,
``f = sigmoid(W_f @ x + b_f)``, ..., records one matmul/affine node per gate. Each weight is a
different signature, so the body's scheduler cannot batch them: one kernel per gate. When a cell
is traced, ``arrange`` finds such products and merges them into one step:

- **rows**: products ``W_j @ x`` (+ ``b_j``) with the *same* body value ``x`` (same operand
  refs) and weights with the same column count and dtype become ``W @ x`` (+ ``b``) over the
  row-concatenated weights (and biases); each member's result is a column slice of the merged
  result (a view, no copy). Row counts may differ.
- **stack**: independent products ``W_j @ x_j`` with *different* operands but equal-shaped
  weights (and operands of one class) become one batched matmul over a ``(k, m, n)`` weight
  stack; the operands are stacked (one copy of the activations, as a joined step copies them),
  each member's result is ``Y[j]`` (a view).

Merged gates of equal size are also exposed as the parts of one synthetic node, so that the
elementwise ops that follow (``sigmoid`` of i, f, o) run as one kernel over adjacent parts, as
they do after ``la.split`` of a fused weight.

Where the weights live (why they are never stale, and never moved)
-----------------------------------------------------------------
The row-concatenated weights are made once per flush and reused by every batch of that flush
(DyNet and Cavs copy them per batch). Parameters may be updated in place between flushes (an
optimizer step), so a copy kept across flushes could go stale; one per flush costs the weights'
size once per scope, which the copied-bytes stats count. Parameters that already are
consecutive rows of one buffer (create gate weights as row blocks of one array to get this)
are read in place, without any copy. Products whose weights differ in dtype or trailing shape
stay unmerged.

Weights read transposed
-----------------------
A batch of ``W @ x`` runs as one ``X @ W.T``. With ``W`` stored row-major, OpenBLAS multiplies a
few rows by ``W.T`` up to 5x slower than by the same matrix stored column-major (512 x 256: 58
µs against 10 µs for 4 rows, 104 against 72 for 29, 479 against 453 for 300; a classifier's
5 x 128: 51 against 16 µs for 1,200 rows); from ~1,000 rows both layouts are as fast.
Recurrent steps and the upper levels of trees are such small batches, so a flush whose small
batches keep reading one weight reads it from a column-major copy (``weight``), made once per
flush for the same reason as the merged weights. This applies to products in cell bodies, the
merged ones above, and op-level batches (``lazyarray.executor``), on numpy only.
"""
from __future__ import annotations

import contextlib

import numpy as np

import batching

from .array import CLASSES

PART_BITS = batching.PART_BITS

ENABLED = True
_PRODUCTS = ("matmul", "affine")


@contextlib.contextmanager
def disabled():
    """Cells traced inside this block keep one step per product (for comparisons)."""
    global ENABLED
    before, ENABLED = ENABLED, False
    try:
        yield
    finally:
        ENABLED = before


# -- candidates --------------------------------------------------------------------------------

class _Product:
    """A body step that multiplies a parameter by a body value: ``W @ x`` or ``W @ x + bias``."""

    __slots__ = ("step", "op", "weight", "pid", "xrefs", "xcls", "bias", "out_shape", "out_dtype")

    def __init__(self, step, op, weight, pid, xrefs, xcls, bias, out_shape, out_dtype):
        self.step, self.op, self.weight, self.pid = step, op, weight, pid
        self.xrefs, self.xcls, self.bias = xrefs, xcls, bias
        self.out_shape, self.out_dtype = out_shape, out_dtype

    @property
    def rows(self):
        return self.weight.shape[0]


def _product(step):
    payload = step.payload
    if payload.kind != "op" or payload.op.name not in _PRODUCTS or step.mode not in ("one", "join"):
        return None
    layout = payload.layout
    a, b = layout[0], layout[1]
    if a[0] != "shared" or b[0] != "stacked":
        return None
    weight = a[1]
    xshape = CLASSES[b[2]][0]
    if getattr(weight, "ndim", 0) != 2 or len(xshape) not in (1, 2) or weight.shape[1] != xshape[0]:
        return None
    bias = None
    if payload.op.name == "affine":
        bias = layout[2]
        if bias[0] not in ("shared", "const"):
            return None
    out_shape, out_dtype = CLASSES[payload.out_cls]
    xrefs = tuple(r[b[1]] for r in step.refs)
    return _Product(step, payload.op.name, weight, a[2], xrefs, b[2], bias, out_shape, out_dtype)


# -- grouping and placement --------------------------------------------------------------------

def _flat_refs(step):
    for refs in step.refs:
        yield from refs


def _placement(steps, members):
    """Index (in ``steps`` without the members) where one step replacing ``members`` can run, or
    None: after every producer of their operands and before every consumer of their results."""
    ids = {id(s) for s in members}
    nodes = {n for s in members for n in s.members}
    produced_at = {}
    lo, hi = -1, len(steps)
    for i, s in enumerate(steps):
        for n in s.members:
            produced_at[n] = i
    for s in members:
        for r in _flat_refs(s):
            if (r >> PART_BITS) in nodes:
                return None  # a member reads another member
            lo = max(lo, produced_at.get(r >> PART_BITS, -1))
    for i, s in enumerate(steps):
        if id(s) not in ids and any((r >> PART_BITS) in nodes for r in _flat_refs(s)):
            hi = i
            break
    if lo >= hi:
        return None
    return sum(1 for i, s in enumerate(steps[:lo + 1]) if id(s) not in ids)


def _groups(products, key):
    """(kind, products) grouped by ``key`` (in step order); distinct weights only."""
    out: dict = {}
    for p in products:
        group = out.setdefault(key(p), [])
        if all(q.pid != p.pid for q in group):
            group.append(p)
    return [(k[0], g) for k, g in out.items() if len(g) > 1]


def _row_key(p):
    return ("rows", p.op, p.xrefs, p.weight.shape[1], p.weight.dtype.str, p.out_dtype.str)


def _stack_key(p):
    return ("stack", p.op, len(p.xrefs), p.xcls, p.weight.shape, p.weight.dtype.str, p.out_dtype.str,
            p.out_shape)


# -- arranged operands ------------------------------------------------------------------------

class _Rows:
    """Arrays (parameters, or constants broadcast to each member's shape) stacked along axis 0:
    a view when they are consecutive rows of one buffer, else a concatenation made once per flush.
    ``casts``: per array, None or the (dtype, shape) to read it as; a parameter is converted when
    a flush reads it, as a copy made at trace time would miss its in-place updates."""

    __slots__ = ("arrays", "casts")

    def __init__(self, arrays, casts=()):
        self.arrays = arrays
        self.casts = casts if any(c is not None for c in casts) else None

    def current(self, xp, stats, cache):
        if self.casts is None:
            merged = _consecutive(self.arrays)
            if merged is not None:
                return merged
        merged = cache.get(id(self))
        if merged is None:
            arrays = self.arrays if self.casts is None else [
                a if c is None else xp.broadcast_to(xp.asarray(a, dtype=c[0]), c[1])
                for a, c in zip(self.arrays, self.casts)]
            merged = cache[id(self)] = xp.concatenate([xp.asarray(a) for a in arrays], axis=0)
            stats.kernels += 1
            stats.copied_bytes += int(merged.nbytes)
        return merged


def _consecutive(arrays):
    """The row-concatenation of ``arrays`` as a view when they are already consecutive rows of
    one numpy buffer, in this order; else None."""
    first = arrays[0]
    if not all(type(a) is np.ndarray and a.flags.c_contiguous for a in arrays):
        return None
    base = first.base
    if base is None or any(a.base is not base for a in arrays):
        return None
    ptr = first.__array_interface__["data"][0]
    for a in arrays:
        if a.__array_interface__["data"][0] != ptr or a.dtype != first.dtype or a.shape[1:] != first.shape[1:]:
            return None
        ptr += a.nbytes
    shape = (sum(a.shape[0] for a in arrays),) + first.shape[1:]
    # the strides of a dense C-ordered array of that shape: a C-contiguous array's strides along
    # axes of length 1 are arbitrary (``W[0:8:8]`` is one row with a stride of 8 rows), and the
    # merged array read with them took its rows from the wrong places
    strides, step = [], first.itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return np.lib.stride_tricks.as_strided(first, shape=shape, strides=tuple(reversed(strides)), writeable=False)


def _weights(members):
    """Merged weights of ``members``, or None where their dtypes or trailing shapes differ."""
    arrays = [p.weight for p in members]
    first = arrays[0]
    if any(a.dtype != first.dtype or a.shape[1:] != first.shape[1:] for a in arrays):
        return None
    return _Rows(arrays)


def _bias(members):
    """The merged bias of affine members (each broadcast to its member's output), or None."""
    if members[0].bias is None:
        return None
    dtype = members[0].out_dtype
    pieces, casts = [], []
    for p in members:
        value = p.bias[1]
        same = getattr(value, "shape", None) == p.out_shape and getattr(value, "dtype", None) == dtype
        pieces.append(value)
        casts.append(None if same else (dtype, p.out_shape))
    return _Rows(pieces, casts)


# -- weights read transposed ------------------------------------------------------------------

#: Batches of 2 to this many rows read a product's weight from a column-major copy (a single
#: row is a matrix-vector product, and from ~1,000 rows both layouts are as fast)...
SMALL_BATCH = 1024
#: ...once this many of a flush's small batches have read it as it is: the copy costs about
#: what one product saves, so a weight that a single small batch reads is left alone.
WARMUP = 1


def reads_weight(payload) -> bool:
    """Whether a batch of this op multiplies one shared matrix by per-node vectors (``W @ x``,
    run as ``X @ W.T``), so that ``weight`` applies to its first operand."""
    if payload.kind != "op" or payload.op.name not in _PRODUCTS:
        return False
    a, b = payload.layout[0], payload.layout[1]
    return (a[0] == "shared" and b[0] == "stacked" and getattr(a[1], "ndim", 0) == 2
            and len(CLASSES[b[2]][0]) == 1)


def weight(xp, W, rows, stats, cache):
    """The ``W`` a batch of ``rows`` products ``W @ x`` should read: ``W`` itself, or from the
    ``WARMUP + 1``-th small batch of the flush on, its column-major copy (module docstring).
    Keyed by the memory read, not the array object: weights read in place as rows of one
    buffer are a new view per batch. The entry holds ``W``, so that its memory cannot be freed
    and reused by another array while the flush runs; it is also found by ``id(W)`` when read
    again through that very array (a parameter in a cell body: every batch), which skips
    building the key (``__array_interface__`` makes a dict: 1.4 against 0.17 µs a call)."""
    if xp is not np or not 1 < rows <= SMALL_BATCH or type(W) is not np.ndarray or W.flags.f_contiguous:
        return W
    entry = cache.get(id(W))
    if entry is None or entry[0] is not W:
        key = ("column-major", W.__array_interface__["data"][0], W.shape, W.strides, W.dtype.str)
        entry = cache.get(key)
        if entry is None:
            entry = cache[key] = [W, 0]
        if entry[0] is W:
            cache[id(W)] = entry
    if type(entry[1]) is int:
        if entry[1] < WARMUP:
            entry[1] += 1
            return W
        entry[1] = _column_major(W)
        stats.kernels += 1
        stats.copied_bytes += int(W.nbytes)
    return entry[1]


def _column_major(W):
    """``np.asfortranarray(W)`` 32 rows at a time: numpy's own copy walks ``W`` across its rows,
    ~8x slower once ``W`` outgrows the cache (1280 x 512: 3.2 ms against 0.34)."""
    out = np.empty(W.shape, W.dtype, order="F")
    for r in range(0, W.shape[0], 32):
        out[r:r + 32] = W[r:r + 32]
    return out


# -- the merged step ---------------------------------------------------------------------------

class ArrangedStep:
    """Products of one body merged into one kernel; see the module docstring. Members are
    indexed (j, p): product j (one original step) on position p of its operands."""

    mode = "arranged"
    fast = None
    aux = ()
    nref = 1
    parts = None

    def __init__(self, kind, members, weights, bias, xcls, synthetic):
        self.kind = kind                              # "rows" or "stack"
        self.payload = members[0].step.payload
        self.nodes = [p.step.members for p in members]
        self.members = [n for nodes in self.nodes for n in nodes]
        self.refs = [[r] for p in members for r in p.xrefs]
        self.xrefs = [p.xrefs for p in members]       # per product: its operand refs
        self.rows = []
        r0 = 0
        for p in members:
            self.rows.append((r0, r0 + p.rows))
            r0 += p.rows
        self.weights, self.bias = weights, bias
        self.vector = len(CLASSES[xcls][0]) == 1      # x per call is a vector (else a matrix)
        self.synthetic = synthetic                    # per position p: node id of the parts view, or None
        self.labels = [p.step.payload.label for p in members]
        self.originals = [p.step for p in members]    # the products as traced: their backward

    def __repr__(self):
        return f"<arranged {self.kind}: {', '.join(self.labels)}>"


def _operand(xp, values, refs):
    return values[refs[0]] if len(refs) == 1 else xp.concatenate([values[r] for r in refs], axis=0)


def run(xp, step, values, stats, cache):
    """Run an ``ArrangedStep`` (called by ``CellPlan.run``): one kernel, results as views."""
    W = step.weights.current(xp, stats, cache)
    bias = () if step.bias is None else (step.bias.current(xp, stats, cache),)
    k, n_products = len(step.xrefs[0]), len(step.xrefs)
    if step.kind == "rows":                     # (k*calls, K[, q]): the members' matmul/affine kernel
        X = _operand(xp, values, step.xrefs[0])
        if X.ndim == 2:
            W = weight(xp, W, len(X), stats, cache)
        Y = step.payload.op.batched(xp, (False, True, False)[:2 + len(bias)], W, X, *bias)
    else:                                       # (products, k*calls, m[, q])
        X = xp.stack([_operand(xp, values, refs) for refs in step.xrefs])
        W3 = W.reshape((n_products, -1) + W.shape[1:])
        Y = xp.matmul(X, W3.transpose(0, 2, 1)) if step.vector else xp.matmul(W3[:, None], X)
        if bias:
            Y = Y + bias[0].reshape((n_products, 1) + Y.shape[2:])
    stats.kernels += 1
    if step.kind == "rows":
        calls = Y.shape[0] // k
        for p in range(k):
            block = Y[p * calls:(p + 1) * calls]
            if step.synthetic is None:
                for nodes, (r0, r1) in zip(step.nodes, step.rows):
                    values[nodes[p] << PART_BITS] = block[:, r0:r1]
                continue
            whole = block.reshape((calls, n_products, -1) + block.shape[2:])
            node = step.synthetic[p] << PART_BITS
            values[node] = whole
            for j, nodes in enumerate(step.nodes):
                values[node + j + 1] = values[nodes[p] << PART_BITS] = whole[:, j]
    else:
        calls = Y.shape[1] // k
        axes = (1, 0) + tuple(range(2, Y.ndim))
        for p in range(k):
            block = Y[:, p * calls:(p + 1) * calls]
            for j, nodes in enumerate(step.nodes):
                values[nodes[p] << PART_BITS] = block[j]
            if step.synthetic is not None:
                node = step.synthetic[p] << PART_BITS
                values[node] = block.transpose(axes)
                for j in range(n_products):
                    values[node + j + 1] = block[j]


# -- the pass ----------------------------------------------------------------------------------

def arrange(steps, body_nodes):
    """``steps`` (a traced body in schedule order) with independent products of distinct
    parameters merged into ``ArrangedStep``s (called once per trace by ``cell.trace``). Where the
    merged products have equal sizes, the elementwise steps that read them are rebuilt to read
    them as parts of one value (one kernel over adjacent gates, as after ``la.split``)."""
    products = [p for p in map(_product, steps) if p is not None] if ENABLED else []
    if len(products) < 2:
        return steps
    taken: set = set()
    next_node = body_nodes
    for kind, group in _groups(products, _row_key) + _groups(products, _stack_key):
        chosen: list = []
        for p in group:  # greedy, in step order: members that can still share one position
            if id(p.step) not in taken and _placement(steps, [q.step for q in chosen + [p]]) is not None:
                chosen.append(p)
        if len(chosen) < 2:
            continue
        chosen.sort(key=lambda p: p.step.members[0])  # recording order: gates as written
        weights = _weights(chosen)
        if weights is None:
            continue
        at = _placement(steps, [p.step for p in chosen])
        k = len(chosen[0].xrefs)
        synthetic = None
        if len({p.rows for p in chosen}) == 1:
            synthetic = list(range(next_node, next_node + k))
            next_node += k
        step = ArrangedStep(kind, chosen, weights, _bias(chosen), chosen[0].xcls, synthetic)
        ids = {id(p.step) for p in chosen}
        taken |= ids
        rest = [s for s in steps if id(s) not in ids]
        steps = rest[:at] + [step] + rest[at:]
        if synthetic is not None:
            steps = _reread(steps, step)
    return steps


def _reread(steps, merged):
    """Elementwise steps that read merged results read them as parts ``j + 1`` of the synthetic
    node of their position, so that a step over several gates finds adjacent parts. (Only
    elementwise steps: products keep their refs, which ``_placement`` relies on.)"""
    rename = {}
    for j, nodes in enumerate(merged.nodes):
        for p, node in enumerate(nodes):
            rename[node << PART_BITS] = (merged.synthetic[p] << PART_BITS) + j + 1
    out = []
    for s in steps:
        payload = s.payload
        if isinstance(s, ArrangedStep) or payload.kind != "op" or not payload.op.elementwise \
                or not any(r in rename for r in _flat_refs(s)):
            out.append(s)
            continue
        refs = [[rename.get(r, r) for r in refs] for refs in s.refs]
        out.append(type(s)(payload, s.members, refs, s.aux, s.nref))
    return out
