"""Matrix products. Many ``W @ x_i`` with a shared ``W`` become one ``X @ W.T`` (one GEMM)."""
from __future__ import annotations

import numpy as np

from . import elementwise  # noqa: F401  (declares add, whose kernel affine reuses)
from .gradients import sum_to, unbroadcast
from .kernels import infer_by_running
from .opdef import ARRAY, ARRAYS, REGISTRY, Fusion, OpDef, ShapeError, declare


def _eager(xp, a, b):
    return xp.matmul(a, b)


def _infer(a, b):
    sa, sb = np.shape(a), np.shape(b)
    if not sa or not sb:
        raise ShapeError(f"matmul: operands must have rank >= 1, got shapes {sa} and {sb}")
    a2 = sa if len(sa) > 1 else (1,) + sa
    b2 = sb if len(sb) > 1 else sb + (1,)
    if a2[-1] != b2[-2]:
        raise ShapeError(f"matmul: shapes {sa} and {sb} are not aligned ({a2[-1]} != {b2[-2]})")
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise ShapeError(f"matmul: batch dimensions of {sa} and {sb} do not broadcast") from None
    out = batch + (a2[-2] if len(sa) > 1 else None, b2[-1] if len(sb) > 1 else None)
    return tuple(d for d in out if d is not None), np.result_type(a, b)


def _batched(xp, stacked, a, b, out=None):
    sa, sb = stacked
    ra, rb = a.ndim - sa, b.ndim - sb
    if sb and not sa and ra == 2 and rb == 1:       # W @ x_i  ->  X @ W.T
        return xp.matmul(b, a.T, out=out)
    if sa and not sb and rb == 2:                    # x_i @ W  ->  X @ W
        return xp.matmul(a, b, out=out)
    # General case: vectors become matrices, stacked operands get singleton batch axes after
    # the leading one so that numpy's broadcasting pairs instance i with instance i.
    if ra == 1:
        a = a[..., None, :]
    if rb == 1:
        b = b[..., :, None]
    rank = max(a.ndim - sa, b.ndim - sb)
    if sa and a.ndim - 1 < rank:
        a = a.reshape((a.shape[0],) + (1,) * (rank - a.ndim + 1) + a.shape[1:])
    if sb and b.ndim - 1 < rank:
        b = b.reshape((b.shape[0],) + (1,) * (rank - b.ndim + 1) + b.shape[1:])
    res = xp.matmul(a, b)
    if ra == 1:
        res = res[..., 0, :]
    if rb == 1:
        res = res[..., 0]
    return res


def _vjp(xp, stacked, needs, g, ans, a, b):
    """The forward's cases: ``W @ x_i`` gives ``dW = G.T @ X`` (one product for the batch) and
    ``dX = G @ W``; ``x_i @ W`` gives ``dX = G @ W.T``, ``dW = X.T @ G`` over every row; any
    other pairing goes through the forward's own alignment, then broadcasting is undone."""
    sa, sb = stacked
    ra, rb = a.ndim - sa, b.ndim - sb
    if sb and not sa and ra == 2 and rb == 1:
        return (g.T @ b if needs[0] else None), (g @ a if needs[1] else None)
    if sa and not sb and rb == 2:
        return ((g @ b.T if needs[0] else None),
                (a.reshape(-1, a.shape[-1]).T @ g.reshape(-1, g.shape[-1]) if needs[1] else None))
    a2 = a[..., None, :] if ra == 1 else a
    b2 = b[..., :, None] if rb == 1 else b
    rank = max(a2.ndim - sa, b2.ndim - sb)
    if sa and a2.ndim - 1 < rank:
        a2 = a2.reshape((a2.shape[0],) + (1,) * (rank - a2.ndim + 1) + a2.shape[1:])
    if sb and b2.ndim - 1 < rank:
        b2 = b2.reshape((b2.shape[0],) + (1,) * (rank - b2.ndim + 1) + b2.shape[1:])
    g2 = g[..., None] if rb == 1 else g
    g2 = g2[..., None, :] if ra == 1 else g2
    da = sum_to(xp, g2 @ xp.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape) if needs[0] else None
    db = sum_to(xp, xp.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape) if needs[1] else None
    return da, db


declare(OpDef(
    name="matmul",
    doc="Matrix product with numpy's rules (``a @ b``); a shared weight batches into one GEMM.",
    operands=(("a", ARRAY), ("b", ARRAY)),
    eager=_eager, batched=_batched, infer=_infer, heavy=True,
    methods=("__matmul__", "dot"), reflected=("__rmatmul__",), aliases=("dot",), vjp=_vjp, numpy="matmul",
))


def _affine(xp, a, b, bias):
    product = _eager(xp, a, b)
    out = product + bias
    if out.shape != product.shape:      # eager mode accepts what a scope records
        _bias_error(bias, product.shape, out.shape)
    return out


def _bias_error(bias, product, shape):
    raise ShapeError(f"affine: bias of shape {np.shape(bias)} would broadcast a @ b of shape {product} to {shape}")


def _affine_batched(xp, stacked, a, b, bias, out=None):
    """The bias goes into the product's own memory (``out`` or a fresh product) unless adding it
    widens the dtype or the product is one shared matrix that per-node biases broadcast."""
    per_node = stacked[0] or stacked[1]
    product = _batched(xp, stacked[:2], a, b, out=out if per_node else None)
    if product is not out and per_node and xp.result_type(product, bias) == product.dtype:
        out = product
    return REGISTRY["add"].batched(xp, (per_node, stacked[2]), product, bias, out=out if product is out else None)


def _affine_infer(a, b, bias):
    shape, dtype = infer_by_running(_affine)(a, b, bias)
    product = _infer(a, b)[0]
    if shape != product:
        _bias_error(bias, product, shape)
    return shape, dtype


declare(OpDef(
    name="affine",
    doc="``a @ b + bias`` in one node (DyNet's affine_transform): the product writes the result "
        "and the bias is added in place. ``W @ x + b`` records this op when ``W @ x`` is used only "
        "there, so model code need not change.",
    operands=(("a", ARRAY), ("b", ARRAY), ("bias", ARRAY)),
    eager=_affine, batched=_affine_batched, infer=_affine_infer, heavy=True,
    fuses=(Fusion("matmul", "add", lambda producer, consumer, ndim: {}, commutes=True),),
    vjp=lambda xp, stacked, needs, g, ans, a, b, bias: (
        *_vjp(xp, stacked[:2], needs[:2], g, ans, a, b),
        unbroadcast(xp, g, bias, stacked[2]) if needs[2] else None),
))


def _einsum_terms(subscripts, n):
    """(input terms, output term) of explicit or implicit (numpy's rule: the letters used once,
    in ASCII order) subscripts; ellipses and a letter repeated within one operand (a diagonal)
    are refused: the batched form and the gradient name every axis once."""
    if not isinstance(subscripts, str):
        raise ShapeError(f"einsum: subscripts must be a string, got {subscripts!r}")
    spec = subscripts.replace(" ", "")
    inputs, arrow, out = spec.partition("->")
    terms = inputs.split(",")
    if "." in spec:
        raise ShapeError(f"einsum: ellipsis in {subscripts!r} is not supported: name every axis")
    if len(terms) != n:
        raise ShapeError(f"einsum: {subscripts!r} names {len(terms)} operand(s), got {n}")
    for term in terms + [out]:
        if not all(c.isascii() and c.isalpha() for c in term):
            raise ShapeError(f"einsum: {subscripts!r}: subscripts are letters a-z, A-Z")
        if len(set(term)) != len(term):
            raise ShapeError(f"einsum: {subscripts!r} repeats a letter within one term ({term!r}: a diagonal), "
                             "which is not supported")
    if not arrow:
        letters = "".join(terms)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return terms, out


def _batch_letter(subscripts):
    """A letter the subscripts do not use: the batch axis."""
    used = set(subscripts)
    for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba":
        if c not in used:
            return c
    raise ShapeError(f"einsum: {subscripts!r} uses every letter, none is left for the batch axis")


def _einsum(xp, operands, subscripts=""):
    terms, out = _einsum_terms(subscripts, len(operands))
    return xp.einsum(",".join(terms) + "->" + out, *operands, optimize=len(operands) > 1)


def _einsum_batched(xp, stacked, operands, out=None, subscripts=""):
    """One einsum for the batch: stacked operands and the result get a batch letter, shared ones
    (``W`` of ``'ij,j->i'``) none, so numpy contracts them once for every node (one GEMM)."""
    terms, result = _einsum_terms(subscripts, len(operands))
    b = _batch_letter(subscripts)
    spec = ",".join(b + t if s else t for t, s in zip(terms, stacked)) + "->" + b + result
    return xp.einsum(spec, *operands, optimize=len(operands) > 1)


def _einsum_vjp(xp, stacked, needs, g, ans, operands, subscripts=""):
    """Operand k's gradient is the einsum of ``g`` with the other operands into k's subscripts
    (a shared operand's lack the batch letter: summed over the batch); letters only k has
    (summed within k alone) are broadcast back."""
    terms, result = _einsum_terms(subscripts, len(operands))
    b = _batch_letter(subscripts)
    subs = [b + t if s else t for t, s in zip(terms, stacked)]
    # in one precision: the contraction order depends on the batch size, and a pair of narrower
    # operands contracted first would round in one order only (batched and eager would differ)
    wide = xp.result_type(g, *operands)
    g = xp.asarray(g, dtype=wide)
    given, operands = operands, [xp.asarray(o, dtype=wide) for o in operands]
    grads = []
    for k, (x, sub, need) in enumerate(zip(given, subs, needs[0])):
        if not need:
            grads.append(None)
            continue
        inputs = [b + result] + subs[:k] + subs[k + 1:]
        present = set("".join(inputs))
        kept = "".join(c for c in sub if c in present)
        gk = xp.einsum(",".join(inputs) + "->" + kept, g, *operands[:k], *operands[k + 1:],
                       optimize=len(inputs) > 2)
        if kept != sub:
            gk = xp.broadcast_to(gk.reshape([n if c in present else 1 for c, n in zip(sub, x.shape)]), x.shape)
        grads.append(gk.real if gk.dtype.kind == "c" and x.dtype.kind != "c" else gk)
    return (grads,)


declare(OpDef(
    name="einsum",
    doc="Einstein summation as ``numpy.einsum`` (``la.einsum('ij,j->i', W, x)``), every axis named: no "
        "ellipsis, no letter twice in one operand. A shared operand batches into one contraction.",
    operands=(("operands", ARRAYS),), attrs=(("subscripts", ""),),
    eager=_einsum, batched=_einsum_batched, infer=infer_by_running(_einsum), heavy=True, vjp=_einsum_vjp,
))
