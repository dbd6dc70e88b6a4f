"""One BLAS thread for benchmarks: the variables only work before numpy loads, and ``python -m
lazyarray demo`` or ``python -m benchmarks`` has loaded it already, so the command re-executes
itself with them set."""
from __future__ import annotations

import os
import sys

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
