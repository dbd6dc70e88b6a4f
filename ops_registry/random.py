"""Dropout with counter-based masks: the mask of a call is a hash of the call's key and each
element's index, so a batch computes exactly the masks its calls would eagerly, whatever batch
they land in (a stateful generator would hand out its numbers in batch order instead)."""
from __future__ import annotations

import numpy as np

from .gradients import unbroadcast
from .opdef import ARRAY, INDEX, OpDef, ShapeError, declare

_M32 = 0xFFFFFFFF


def mix(key: int) -> int:
    """A call's key (a seed and a count, any int) as 32 well-mixed bits (murmur3's finaliser)."""
    h = (key ^ (key >> 32)) & _M32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def _keep(xp, keys, shape, rate):
    """(B, *shape) booleans: element i of call b is kept where fmix32(key_b + i * golden) is at
    least rate * 2**32, on 32-bit integers (a few passes over memory per call batch)."""
    n = 1
    for d in shape:
        n *= d
    h = xp.asarray(keys, dtype=np.uint32).reshape(-1, 1) + xp.arange(n, dtype=np.uint32) * np.uint32(0x9E3779B9)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return (h >= np.uint32(min(int(rate * 2.0 ** 32), _M32))).reshape((-1,) + tuple(shape))


def _check(rate):
    if not 0 <= rate < 1:
        raise ShapeError(f"dropout: rate must be in [0, 1), got {rate!r}")


def _batched(xp, stacked, x, key, out=None, rate=0.5):
    _check(rate)
    out = xp.multiply(x, _keep(xp, key, x.shape[1:] if stacked[0] else x.shape, rate), out=out)
    out *= x.dtype.type(1 / (1 - rate))
    return out


def _eager(xp, x, key, rate=0.5):
    return _batched(xp, (True,), xp.asarray(x)[None], np.asarray([key]), rate=rate)[0]


def _infer(x, key, rate=0.5):
    _check(rate)
    if np.result_type(x).kind != "f":
        raise ShapeError(f"dropout: needs a float array, got {np.result_type(x)}")
    return np.shape(x), np.result_type(x)


def _vjp(xp, stacked, needs, g, ans, x, key, rate=0.5):
    keep = _keep(xp, key, x.shape[1:] if stacked[0] else x.shape, rate)
    return unbroadcast(xp, g * keep * g.dtype.type(1 / (1 - rate)), x, stacked[0]), None


declare(OpDef(
    name="dropout",
    doc="Zeroes each entry with probability ``rate`` and scales the rest by 1 / (1 - rate); the "
        "mask is a hash of the per-call ``key`` (drawn by ``la.dropout`` from ``la.manual_seed``'s "
        "stream), so batched and eager calls drop the same entries.",
    operands=(("x", ARRAY), ("key", INDEX)), attrs=(("rate", 0.5),),
    eager=_eager, batched=_batched, infer=_infer, elementwise=False, vjp=_vjp,
))
