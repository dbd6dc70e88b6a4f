"""Public functions whose call is not their registry operator's: numpy's ``split`` and
``einsum`` forms, and ``child_sum``."""
from __future__ import annotations

import operator

import numpy as np

from ops_registry import REGISTRY, ShapeError

from .array import LazyArray
from .creation import array
from .ops import FUNCTIONS


_split_equal, _getitem = FUNCTIONS["split"], FUNCTIONS["getitem"]


def split(x, indices_or_sections, axis=0):
    if indices_or_sections.__class__ is int or np.ndim(indices_or_sections) == 0:
        return _split_equal(x, indices_or_sections, axis)
    shape = x.shape if x.__class__ is LazyArray else np.shape(x)
    try:
        points = [operator.index(i) for i in indices_or_sections]
        ax = operator.index(axis)
    except TypeError:
        raise ShapeError(f"la.split: split points and axis must be integers, got {indices_or_sections!r}, "
                         f"axis {axis!r}") from None
    if not -len(shape) <= ax < len(shape):
        raise ShapeError(f"la.split: axis {axis} is out of bounds for an operand of shape {shape}")
    lead = (slice(None),) * (ax % len(shape))
    bounds = [0, *points, shape[ax]]
    return tuple(_getitem(x, lead + (slice(a, b),)) for a, b in zip(bounds, bounds[1:]))


split.__doc__ = REGISTRY["split"].doc + """

``la.split(x, indices_or_sections, axis=0)`` as ``numpy.split``: a number of equal parts (one
node with that many outputs, at most ``batching.PART_MASK``), or for a list of split points the
parts between them as basic slices (views, no kernel; any number, empty ones included).
Eager outside ``la.batching()``; recorded inside one."""


_einsum = FUNCTIONS["einsum"]


def einsum(subscripts, *operands):
    return _einsum(list(operands), subscripts)


einsum.__doc__ = REGISTRY["einsum"].doc + """

``la.einsum(subscripts, *operands)`` as ``numpy.einsum`` (``la.einsum('bij,bj->bi', A, x)``; the
registry's form takes the operands as one list). Eager outside ``la.batching()``; recorded
inside one."""


_add = FUNCTIONS["add"]


def child_sum(values) -> LazyArray:
    """The sum of a varying number of values of one shape (a child-sum TreeLSTM's children),
    recorded so that calls batch whatever their count: as a balanced tree of pairwise ``add``s,
    every one of which has the signature (add, class, class) of the values alone. A stack and a
    sum over axis 0 would key each call by its count (the stack's operand list, the (k, H)
    class), so nodes with 2, 3 or 5 children would never share a batch; here k values take
    ceil(log2 k) levels of adds, and every node's level j batches together. One value is
    returned as it is; none is a ShapeError (a leaf's sum is the caller's ``la.zeros(H)``)."""
    values = list(values)
    if not values:
        raise ShapeError("la.child_sum: no values to sum (for a leaf, pass la.zeros(shape) itself)")
    while len(values) > 1:
        values = [_add(values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0] if values[0].__class__ is LazyArray else array(values[0])
