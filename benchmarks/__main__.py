"""``python -m benchmarks``: the side-by-side benchmark (benchmarks.bench), restarted with one
BLAS thread per process unless the variables are set (--threads; lazyarray.threads)."""
import sys

from lazyarray.threads import reexec_with_blas_threads

from .bench import main, parse_args

if __name__ == "__main__":
    reexec_with_blas_threads("benchmarks", sys.argv[1:], parse_args(sys.argv[1:]).threads)
    sys.exit(main())
