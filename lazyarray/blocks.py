"""Source for the elementwise steps of a traced cell body (used by ``cell._compile``), whole
or in row blocks.

The elementwise tail of a cell (an LSTM's gates: sigmoid, tanh, products, sums) makes one pass
over memory per op. For a batch of thousands of calls (the leaves of 256 trees) its arrays
outgrow the CPU caches and every pass goes to memory: measured 2x slower than the same ops
over row blocks that stay in L2 (TreeLSTM leaves, H=256, 5,064 calls: 12.6 ms whole, 5.6 ms in
blocks of 512 rows; hand-written numpy, one call per gate, 6.1 ms). So, on numpy, a run of
consecutive elementwise steps also compiles to a loop over blocks of ``BLOCK_BYTES`` per
value, taken when a batch has more rows than one block: values that only the run reads live in
block-sized scratch, values read later are written whole, once. A blocked step counts as one
kernel in the stats, as it does unblocked.
"""
from __future__ import annotations

import numpy as np

import batching

from .array import CLASSES

PART_BITS, PART_MASK = batching.PART_BITS, batching.PART_MASK
BLOCK_BYTES = 1 << 19  # per value and block: a quarter of this machine's L2 (256 KiB-1 MiB measured equal)


def blockable(step) -> bool:
    payload = step.payload
    if payload.kind != "op" or not payload.op.elementwise:
        return False
    return step.mode in ("parts", "each") or (step.mode == "one" and step.fast is not None)


def runs(steps):
    """(first, last) step indices of maximal runs of two or more blockable steps."""
    out, start = [], None
    for i, step in enumerate(steps + [None]):
        if step is not None and blockable(step):
            start = i if start is None else start
            continue
        if start is not None and i - start >= 2:
            out.append((start, i - 1))
        start = None
    return out


def _row_bytes(step):
    shape, dtype = CLASSES[step.payload.out_cls]
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return size * len(step.members) if step.mode == "parts" else size


def eager_pairs_calls(payload) -> bool:
    """Whether an elementwise op's eager kernel computes a whole batch: no attributes and every
    per-call operand of the highest rank, so numpy's broadcasting pairs call with call."""
    if not payload.op.elementwise or payload.attrs:
        return False
    ranks = [(len(CLASSES[s[2]][0]), True) if s[0] == "stacked" else (np.ndim(s[1]), False)
             for s in payload.layout]
    top = max(r for r, _ in ranks)
    return all(r == top for r, stacked in ranks if stacked)


def elementwise(env, i, step):
    """Name of ``f(xp, *operands, out=None)`` for elementwise step ``i``: its eager kernel where
    that pairs the calls (``eager_pairs_calls``), else the batched rule; decided once, when the
    body is compiled, not per batch."""
    payload = step.payload
    op, attrs = payload.op, payload.attrs
    flags = tuple(spec[0] == "stacked" for spec in payload.layout)
    if eager_pairs_calls(payload):
        env[f"e{i}"] = op.eager
    else:
        env[f"e{i}"] = lambda xp, *operands, out=None: op.batched(xp, flags, *operands, out=out, **attrs)
    return f"e{i}"


def _constant(env, name, value):
    env[name] = value
    return name


def part_args(env, i, step, rows):
    """Source of a parts step's operands: (calls, k, ...) views of adjacent parts of a split,
    ``rows`` of them."""
    k, parts, args = len(step.members), iter(step.parts), []
    for j, spec in enumerate(step.payload.layout):
        if spec[0] == "stacked":
            node, first = next(parts)
            args.append(f"values[{node << PART_BITS}][{rows}, {first - 1}:{first - 1 + k}]")
        else:
            args.append(_constant(env, f"c{i}_{j}", spec[1]))
    return ", ".join(args)


def member_args(env, i, step, p, source):
    """Source of member ``p``'s operands; ``source(ref)`` is a per-call value's source."""
    return ", ".join(source(step.refs[p][spec[1]]) if spec[0] == "stacked" else
                     _constant(env, f"c{i}_{p}_{j}", spec[1]) for j, spec in enumerate(step.payload.layout))


def lines(plan, first, last, env, live):
    """Source lines of the blocked loop over steps ``first..last`` (see the module docstring);
    ``live``: nodes read after the run or returned by the cell."""
    steps = plan.steps[first:last + 1]
    made = {m for step in steps for m in step.members}
    rows = max(8, BLOCK_BYTES // max(max(map(_row_bytes, steps)), 1))
    head, body, tail = [], [], []

    def operand(ref):
        if ref >> PART_BITS in made and not ref & PART_MASK:
            return f"b{ref >> PART_BITS}"
        return f"values[{ref}][lo:hi]"

    def target(tag, shape, dtype, whole, direct=None):
        """A step's block output: rows of an array for all calls (``whole``: read after the
        run; a cell output may be the caller's ``into``), else block scratch."""
        env[f"dt{tag}"] = dtype
        if not whole:
            head.append(f"w{tag} = xp.empty(({rows},) + {tuple(shape)!r}, dt{tag})")
            return f"w{tag}[:k]"
        make = f"xp.empty((calls,) + {tuple(shape)!r}, dt{tag})"
        if direct is not None:
            make = f"{make} if into is None else into[{direct}]"
        head.append(f"w{tag} = {make}")
        return f"w{tag}[lo:hi]"

    kernels = 0
    for i, step in zip(range(first, last + 1), steps):
        payload = step.payload
        shape, dtype = CLASSES[payload.out_cls]
        if step.mode == "one":
            call, sources, ref, _ = step.fast
            env[f"f{i}"] = call
            args = [operand(r) if stacked else _constant(env, f"c{i}_{j}", r)
                    for j, (stacked, r) in enumerate(sources)]
            node = ref >> PART_BITS
            out = target(node, shape, dtype, node in live, plan.direct.get(ref))
            body.append(f"b{node} = f{i}(xp, [{', '.join(args)}], out={out})")
            if node in live:
                tail.append(f"values[{ref}] = w{node}")
            continue
        fn = elementwise(env, i, step)
        kernels += 1 if step.mode == "parts" else len(step.members)
        if step.mode == "parts":  # one kernel over adjacent parts of a split
            whole = any(m in live for m in step.members)
            out = target(f"p{i}", (len(step.members),) + tuple(shape), dtype, whole)
            body.append(f"r = {fn}(xp, {part_args(env, i, step, 'lo:hi')}, out={out})")
            body += [f"b{m} = r[:, {p}]" for p, m in enumerate(step.members)]
            if whole:
                tail += [f"values[{m << PART_BITS}] = wp{i}[:, {p}]" for p, m in enumerate(step.members)]
            continue
        for p, m in enumerate(step.members):  # "each": member by member
            out = target(m, shape, dtype, m in live)
            body.append(f"b{m} = {fn}(xp, {member_args(env, i, step, p, operand)}, out={out})")
            if m in live:
                tail.append(f"values[{m << PART_BITS}] = w{m}")
    loop = [f"for lo in range(0, calls, {rows}):", f"    hi = lo + {rows}", "    k = min(hi, calls) - lo"]
    count = [f"stats.kernels += {kernels}"] if kernels else []
    return rows, head + loop + ["    " + b for b in body] + tail + count
