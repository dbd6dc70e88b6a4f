"""The benchmarks' one-BLAS-thread re-exec: it must set the variables before numpy loads in the
child, keep values a user set, and not loop (the child finds them set and returns)."""
import os
import subprocess
import sys

from lazyarray.threads import BLAS_VARIABLES


def test_reexec_sets_missing_variables_and_keeps_given_ones(tmp_path):
    (tmp_path / "show_blas.py").write_text(
        "import os, sys\n"
        "from lazyarray.threads import BLAS_VARIABLES, reexec_with_blas_threads\n"
        "reexec_with_blas_threads('show_blas', sys.argv[1:])\n"
        "print(sys.argv[1:], [os.environ[v] for v in BLAS_VARIABLES])\n")
    env = {k: v for k, v in os.environ.items() if k not in BLAS_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    env["MKL_NUM_THREADS"] = "3"
    out = subprocess.run([sys.executable, "-m", "show_blas", "a", "b"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, check=True, timeout=120).stdout
    expected = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "3"}
    assert out.strip() == f"{['a', 'b']} {[expected[v] for v in BLAS_VARIABLES]}"


def test_one_blas_thread_limits_inside_and_restores_after():
    """Nested (scopes in several threads share the limit), and lifted only by the outermost;
    a library already at one thread stays so. In a fresh process: the limit is process-wide,
    and other tests' scopes leave it as they found it only when no interrupt cut them short."""
    code = """if True:
        import numpy
        from threadpoolctl import threadpool_info, threadpool_limits
        from lazyarray.threads import one_blas_thread

        def counts():
            return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

        assert counts()
        for before in (2, 1):
            with threadpool_limits(before, user_api="blas"):
                with one_blas_thread():
                    assert counts() == {1}
                    with one_blas_thread():
                        assert counts() == {1}
                    assert counts() == {1}
                assert counts() == {before}
        print("ok")
    """
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
