"""What every backend shares: one instance per backend class."""
from __future__ import annotations


class Backend:
    name = ""
    xp = None
    _instance = None

    @classmethod
    def instance(cls):
        if cls.__dict__.get("_instance") is None:
            cls._instance = cls()
        return cls._instance

    @classmethod
    def empty(cls, shape, dtype):
        return cls.xp.empty(shape, dtype)
