"""The operator declaration: everything the recorder, the executor and the stub generator need.

An operator is declared once (``declare``); eager and batched kernels are written against the
array module ``xp`` (numpy or cupy) so that one declaration serves every backend.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

# Operand kinds.
ARRAY = "array"    # a LazyArray, a numpy array or a Python scalar (scalars are constants of the signature)
ARRAYS = "arrays"  # a sequence of ARRAY operands (concatenate, stack)
INDEX = "index"    # an int (or fixed-shape int sequence) that varies per node: batched as data, not in the key
ATTR = "attr"      # a hashable attribute: part of the signature (axis, number of parts, a static index)


class ShapeError(ValueError):
    """Operands that an operator cannot combine; raised at the call, naming op and shapes."""


@dataclass(frozen=True, eq=False)
class OpDef:
    """One operator.

    ``eager(xp, *operands, **attrs)`` computes one instance; ``batched(xp, stacked, *operands,
    out=None, **attrs)`` computes a batch, where ``stacked[i]`` says whether operand ``i`` carries
    a leading batch axis (per-node values) or is shared by the whole batch (a parameter or a
    constant). ``infer(shapes, dtypes, attrs)`` returns ``(shape, dtype)`` of the result (for a
    multi-output op, of each part) or raises; it runs once per signature, so it may be slow.
    ``alias(base, **attrs)`` returns the batched result as a view of a batched operand when the
    op only reinterprets memory (split, reshape, transpose): the executor then runs no kernel.
    ``bound(*operands, **attrs)`` is the size that INDEX operands index into (checked per call).
    ``gather_view(out, k, **attrs)``: for ops that only assemble k equal-class values (stack,
    concatenate), ``out`` seen as (B, k, *value_shape), or None: then the whole batch is one
    gather straight into the result.
    ``fuses``: the op-level patterns this (fused) op replaces while recording, see ``Fusion``.
    ``vjp``: the gradient rule (``ops_registry.gradients`` says its form); None: the op has
    none, and a backward through it raises naming the op.
    ``vjp_aligned``: for elementwise ops, per operand ``fn(xp, g, ans, *operands)``, its gradient
    where operands and result align (no broadcasting to undo): ``vjp`` is built from it, and a
    compiled cell's backward calls it directly on values of the result's shape.
    ``numpy``: the name of the numpy function that ``eager`` calls with its own operands and
    attributes, in their order (a ufunc, ``concatenate``, ``stack``), if that is all it does:
    eager calls on numpy values call it directly, positionally.
    """

    name: str
    doc: str
    operands: tuple[tuple[str, str], ...]
    eager: Callable[..., Any]
    batched: Callable[..., Any]
    infer: Callable[..., Any]
    attrs: tuple[tuple[str, Any], ...] = ()
    heavy: bool = False
    nout: Callable[[dict], int] | None = None
    alias: Callable[..., Any] | None = None
    bound: Callable[..., int] | None = None
    gather_view: Callable[..., Any] | None = None
    methods: tuple[str, ...] = ()
    reflected: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    elementwise: bool = False
    fuses: tuple["Fusion", ...] = ()
    vjp: Callable[..., Any] | None = None
    vjp_aligned: tuple[Callable[..., Any], ...] | None = None
    numpy: str | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for _, k in self.operands)

    @cached_property
    def plain(self) -> bool:
        """Only ARRAY operands (the common case, with a shorter eager path)."""
        return all(k == ARRAY for _, k in self.operands)


@dataclass(frozen=True)
class Fusion:
    """``consumer(producer(*p), *rest)`` is the fused op applied to ``(*p, *rest)``: users write
    the pattern (``W @ x + b``, ``log_softmax(z)[label]``) and record one node instead of two.

    ``attrs(producer_attrs, consumer_attrs, ndim)`` gives the fused op's attributes, or None
    where the pattern does not apply (``ndim``: rank of the producer's first operand).
    ``commutes``: the producer may also be the consumer's second operand."""

    producer: str
    consumer: str
    attrs: Callable[[dict, dict, int], dict | None]
    commutes: bool = False


REGISTRY: dict[str, OpDef] = {}


def declare(op: OpDef) -> OpDef:
    if op.name in REGISTRY:
        raise ValueError(f"operator {op.name!r} declared twice")
    REGISTRY[op.name] = op
    return op
