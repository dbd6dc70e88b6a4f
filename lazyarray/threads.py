"""BLAS threads. A flush runs its kernels with one BLAS thread (``one_blas_thread``): batched
kernels are small and many, and on a machine with few cores the BLAS's extra threads, starting,
syncing and spinning between kernels, cost more than they compute and take the core that
records (measured in BENCHMARKS.md). Benchmarks also pin every system to one thread with the
environment variables, which only work before numpy loads: ``python -m lazyarray demo`` and
``python -m benchmarks`` re-execute themselves with them set."""
from __future__ import annotations

import contextlib
import os
import sys
import threading

BLAS_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def reexec_with_blas_threads(module: str, argv: list[str], threads: int = 1) -> None:
    """Re-run ``python -m module argv`` with the BLAS thread variables set, unless they are."""
    if all(os.environ.get(v) for v in BLAS_VARIABLES):
        return
    env = dict(os.environ)
    for v in BLAS_VARIABLES:
        env.setdefault(v, str(threads))
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", module, *argv], env)


_guard = threading.Lock()
_state = {"depth": 0, "libraries": None, "restore": ()}


@contextlib.contextmanager
def one_blas_thread():
    """The BLAS limited to one thread inside, its former limits restored after. The limit is
    process-wide: scopes of several threads share one, lifted when the last of them leaves.
    The BLAS libraries are found once (threadpoolctl) and only those above one thread are set:
    where the variables or a user already limit them, entering costs a thread count read per
    library (~0.5 µs), not threadpoolctl's ~8 µs of querying every library, which a value-reading
    model under ``scope.map`` paid at each of its ~90 flushes a scope."""
    with _guard:
        if not _state["depth"]:
            libraries = _state["libraries"]
            if libraries is None:
                from threadpoolctl import ThreadpoolController
                libraries = _state["libraries"] = ThreadpoolController().select(user_api="blas").lib_controllers
            restore = [(lib, n) for lib, n in ((lib, lib.num_threads) for lib in libraries) if n != 1]
            for lib, _ in restore:
                lib.set_num_threads(1)
            _state["restore"] = restore
        _state["depth"] += 1
    try:
        yield
    finally:
        with _guard:
            _state["depth"] -= 1
            if not _state["depth"]:
                for lib, n in _state["restore"]:
                    lib.set_num_threads(n)
