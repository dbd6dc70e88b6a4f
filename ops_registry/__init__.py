"""Every operator declared once (``REGISTRY``); lazyarray generates its functions, methods,
operators and type stub from these declarations."""
from . import elementwise, index, linalg, random, reduce, shape  # noqa: F401  (declarations register themselves)
from .opdef import ARRAY, ARRAYS, ATTR, INDEX, REGISTRY, Fusion, OpDef, ShapeError, declare

__all__ = ["ARRAY", "ARRAYS", "ATTR", "INDEX", "REGISTRY", "Fusion", "OpDef", "ShapeError", "declare"]
