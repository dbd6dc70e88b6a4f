"""The CPU backend."""
from __future__ import annotations

import numpy as np

from .base import Backend


class NumpyBackend(Backend):
    name = "numpy"
    xp = np

    @staticmethod
    def is_device_array(a) -> bool:
        return isinstance(a, np.ndarray)

    @staticmethod
    def stack_into(values, out) -> int:
        """Per-instance inputs into one block; returns the bytes moved across devices (none)."""
        np.stack([v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray) else v for v in values], out=out)
        return 0

    @staticmethod
    def to_device(value):
        return value.get() if hasattr(value, "get") and not isinstance(value, np.ndarray) else np.asarray(value)
