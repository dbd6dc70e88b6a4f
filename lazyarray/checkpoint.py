"""Parameter files: ``la.save(path, params, optimizer=None)`` writes parameters by name, and an
optimizer's hyperparameters, step counts and slots, into one ``.npz``; ``la.load(path,
into=None, optimizer=None)`` reads it back. ``numpy.savez`` with plain arrays only, loaded with
``allow_pickle=False``: opening a file never runs code from it.

Keys: ``lazyarray.format`` (the version), ``param/<name>``, ``optim/class``,
``optim/<hyperparameter>`` and ``state/<slot or "step">/<name>``. Names are the dict's keys
when ``params`` is a dict, else the parameters' own (``la.parameter(v, name=...)``: unnamed
ones get a process-local default, ``p<id>``, that another process will not match).
"""
from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping

import numpy as np

from .array import PARAM_NAMES, _to_numpy
from .grad.handles import _xp
from .optim import Optimizer, check_parameter

__all__ = ["load", "save"]

FORMAT = 1
_FORMAT, _PARAM, _OPTIM, _STATE = "lazyarray.format", "param/", "optim/", "state/"


def save(path, params, optimizer=None):
    """Write ``params`` (an iterable of la.parameter handles, or a dict name -> handle) and,
    optionally, the state of ``optimizer`` (whose parameters must all be among ``params``).
    Device values are copied to the host. Written beside ``path`` and renamed over it, so a run
    killed while saving keeps its previous file."""
    named = _named(params)
    arrays = {_FORMAT: np.array(FORMAT)}
    arrays.update((_PARAM + name, _to_numpy(p._value)) for name, p in named.items())
    if optimizer is not None:
        arrays.update(_optimizer_arrays(optimizer, named))
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load(path, into=None, optimizer=None) -> dict:
    """The parameters in the file, name -> numpy array. ``into`` (an iterable of handles or a
    dict, named as for ``save``): copy each value into the parameter of that name in place
    (same names, shapes and dtypes as the file, or nothing is written). ``optimizer`` (with
    ``into``): restore its hyperparameters, step counts and slots too, so that training
    resumes exactly where the saved run was. Every parameter and slot gets its own copy:
    nothing loaded aliases another parameter, the returned arrays or another optimizer."""
    arrays = _read(path)
    params = {k[len(_PARAM):]: v for k, v in arrays.items() if k.startswith(_PARAM)}
    if optimizer is not None and into is None:
        raise ValueError("la.load(..., optimizer=) needs into=: the optimizer's parameters are found by name")
    if into is None:
        return params
    named = _named(into)
    missing, extra = sorted(set(named) - set(params)), sorted(set(params) - set(named))
    problems = ([f"no parameter named {_names(missing)} in the file"] if missing else []) + \
        ([f"the file's {_names(extra)} match no parameter given"] if extra else [])
    if problems:
        raise ValueError(f"{path}: {'; '.join(problems)}")
    for name, p in named.items():
        if (params[name].shape, params[name].dtype) != (p._value.shape, p._value.dtype):
            raise ValueError(f"{path}: parameter {name!r} is {params[name].dtype}{list(params[name].shape)} in the "
                             f"file, {p._value.dtype}{list(p._value.shape)} here")
    restore = None if optimizer is None else _optimizer_restore(path, arrays, optimizer, named)
    for name, p in named.items():
        p._value[...] = _xp(p._value).asarray(params[name])
    if restore is not None:
        restore()
    return params


def _named(params) -> dict:
    """name -> parameter; a name or a parameter given twice is an error naming them."""
    items = params.items() if isinstance(params, Mapping) else ((None, p) for p in params)
    named, seen, twice = {}, {}, []
    for name, p in items:
        check_parameter(p)
        name = PARAM_NAMES[-p._ref] if name is None else name
        if not isinstance(name, str):
            raise TypeError(f"parameter names are strings, not {type(name).__name__} ({name!r})")
        if name in named:
            twice.append(f"name {name!r}")
        elif p._ref in seen:
            twice.append(f"parameter {seen[p._ref]!r} (again as {name!r})")
        named[name], seen[p._ref] = p, name
    if twice:
        raise ValueError(f"each parameter once, under one name: {', '.join(twice)} given twice")
    return named


def _names(names) -> str:
    return ", ".join(map(repr, names))


def _names_of(optimizer, named, where) -> dict:
    """Parameter id -> name, for every parameter ``optimizer`` updates (each must be named)."""
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"optimizer: an la.optim optimizer, not {type(optimizer).__name__}")
    name_of = {p._ref: name for name, p in named.items()}
    unnamed = [PARAM_NAMES.get(-p._ref) for p in optimizer.params if p._ref not in name_of]
    if unnamed:
        raise ValueError(f"the optimizer updates {_names(unnamed)}, which {where} does not hold: its state "
                         "is kept by parameter name")
    return name_of


def _optimizer_arrays(optimizer, named) -> dict:
    name_of = _names_of(optimizer, named, "params")
    out = {_OPTIM + "class": np.array(type(optimizer).__name__)}
    out.update((_OPTIM + k, np.asarray(getattr(optimizer, k))) for k in optimizer.HYPER if getattr(optimizer, k) is not None)
    for p, state in zip(optimizer.params, optimizer.state):
        out.update((f"{_STATE}{k}/{name_of[p._ref]}", _to_numpy(v)) for k, v in state.items())
    return out


def _optimizer_restore(path, arrays, optimizer, named):
    """Check the file's optimizer state against ``optimizer`` and its parameters; returns the
    function that installs it (run once every check has passed)."""
    name_of = _names_of(optimizer, named, "into")
    kind = arrays.get(_OPTIM + "class")
    if kind is None:
        raise ValueError(f"{path} holds no optimizer state")
    if kind.shape != () or kind.dtype.kind != "U" or str(kind) != type(optimizer).__name__:
        raise ValueError(f"{path} holds the state of a {kind} optimizer, not of a {type(optimizer).__name__}")
    hyper = {}
    for k in optimizer.HYPER:
        v = arrays.get(_OPTIM + k)
        if v is None and k != "clip":
            raise ValueError(f"{path}: optimizer hyperparameter {k!r} is missing")
        if v is not None and (v.dtype.kind not in "biuf" or v.ndim > 1):
            raise ValueError(f"{path}: optimizer hyperparameter {k!r} is a {v.dtype}{list(v.shape)} array")
        hyper[k] = None if v is None else v.item() if v.ndim == 0 else tuple(v.tolist())
    unknown = [k for k in arrays if k.startswith(_OPTIM) and k[len(_OPTIM):] not in ("class", *optimizer.HYPER)]
    if unknown:
        raise ValueError(f"{path}: unknown optimizer entries {_names(unknown)}")
    try:    # the constructor's checks, and the slots these hyperparameters keep
        probe = type(optimizer)(optimizer.params, **hyper)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: optimizer hyperparameters: {error}") from None
    index = {name_of[p._ref]: i for i, p in enumerate(optimizer.params)}
    states = [{} for _ in optimizer.params]
    for key, v in arrays.items():
        if not key.startswith(_STATE):
            continue
        slot, _, name = key[len(_STATE):].partition("/")
        if name not in index:
            raise ValueError(f"{path}: optimizer state {key!r} is for no parameter this optimizer updates")
        p = optimizer.params[index[name]]
        if slot == "step":
            if v.shape != () or v.dtype.kind not in "iu" or v < 1:
                raise ValueError(f"{path}: {key!r} must be a step count >= 1, not {v.tolist()!r}")
            v = int(v)
        elif slot not in probe.slots():
            raise ValueError(f"{path}: {type(optimizer).__name__} keeps no slot {slot!r} ({key!r})")
        elif (v.shape, v.dtype) != (p._value.shape, p._value.dtype):
            raise ValueError(f"{path}: {key!r} is {v.dtype}{list(v.shape)}, its parameter "
                             f"{p._value.dtype}{list(p._value.shape)}")
        else:
            v = _xp(p._value).array(v)      # a copy on the parameter's device
        states[index[name]][slot] = v
    for p, state in zip(optimizer.params, states):    # a slot may be missing: see Optimizer._update
        if state and "step" not in state:
            raise ValueError(f"{path}: the optimizer state of {PARAM_NAMES.get(-p._ref)!r} has no step count")

    def install():
        vars(optimizer).update(hyper)
        optimizer.state = states
    return install


def _read(path) -> dict:
    """Every array in the file, checked to be a parameter file of this format."""
    with open(path, "rb") as f:     # a missing file raises FileNotFoundError, as open() does
        try:
            npz = np.load(f, allow_pickle=False)
            if isinstance(npz, np.ndarray):
                raise ValueError("a single .npy array")
            with npz:
                arrays = {k: npz[k] for k in npz.files}
        except (ValueError, zipfile.BadZipFile, EOFError, KeyError, OSError) as error:
            raise ValueError(f"{path} is not a lazyarray parameter file (.npz): {error}") from None
    version = arrays.get(_FORMAT)
    if version is None:
        raise ValueError(f"{path} is an .npz file but not a lazyarray parameter file (no {_FORMAT!r})")
    if version.shape != () or version.dtype.kind not in "iu" or int(version) != FORMAT:
        raise ValueError(f"{path} has lazyarray format {version.tolist()!r}; this version reads format {FORMAT}")
    stray = [k for k in arrays if k != _FORMAT and not k.startswith((_PARAM, _OPTIM, _STATE))]
    if stray:
        raise ValueError(f"{path}: unknown entries {_names(stray)}")
    odd = [k for k in arrays if k.startswith(_PARAM) and arrays[k].dtype.kind not in "biufc"]
    if odd:
        raise ValueError(f"{path}: parameters {_names(odd)} are not numeric arrays")
    return arrays
