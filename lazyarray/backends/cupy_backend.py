"""The GPU backend (cupy). Imported only when a scope or ``set_default_backend`` asks for
"cupy". Data stays on the device inside a scope: inputs cross once per input batch, values come
back only when forced; both directions are counted in ``scope.stats``."""
from __future__ import annotations

import numpy as np

from .base import Backend

try:
    import cupy
except ImportError as error:  # pragma: no cover - depends on the machine
    raise ImportError("the cupy backend needs cupy and an NVIDIA GPU: install the cupy wheel of your CUDA, "
                      "e.g. pip install cupy-cuda12x (see https://docs.cupy.dev/en/stable/install.html)") from error


class CupyBackend(Backend):
    name = "cupy"
    xp = cupy

    @staticmethod
    def is_device_array(a) -> bool:
        return isinstance(a, cupy.ndarray)

    @staticmethod
    def stack_into(values, out) -> int:
        """Per-instance inputs into one device block; returns the bytes moved host -> device."""
        host = [v for v in values if not isinstance(v, cupy.ndarray)]
        if not host:
            cupy.stack(values, out=out)
            return 0
        if len(host) == len(values):
            block = np.stack(values)
            out.set(block)
            return block.nbytes
        cupy.stack([cupy.asarray(v) for v in values], out=out)
        return sum(v.nbytes for v in host)

    @staticmethod
    def to_device(value):
        return cupy.asarray(value)
