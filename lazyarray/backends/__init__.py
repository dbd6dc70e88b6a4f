"""Array backends behind one small interface: the array module kernels are written against
(``xp``), allocation, host transfers. cupy is imported only when asked for."""
from __future__ import annotations

import threading

from .numpy_backend import NumpyBackend

_BACKENDS = {"numpy": NumpyBackend}
_default = threading.local()


def _load(name):
    if name == "cupy":
        from .cupy_backend import CupyBackend  # imports cupy: only when asked for
        _BACKENDS["cupy"] = CupyBackend
    else:
        raise ValueError(f"unknown backend {name!r}; choose 'numpy' or 'cupy'")
    return _BACKENDS[name]


def get_backend(backend=None):
    """A backend object from a name, an object, or (None) the default set by set_default_backend."""
    if backend is None:
        backend = getattr(_default, "name", "numpy")
    if not isinstance(backend, str):
        return backend
    cls = _BACKENDS.get(backend) or _load(backend)
    return cls.instance()


def set_default_backend(name: str) -> None:
    """The backend of scopes that do not name one (per thread)."""
    get_backend(name)
    _default.name = name
