"""Builds ``lazyarray._recorders`` (the recording stubs compiled by Cython, see
``lazyarray/recorders.py``) where Cython and a C compiler are there; anywhere else, or with
``LAZYARRAY_PURE_PYTHON=1``, lazyarray installs as pure Python and runs the same stubs
uncompiled (``la.compiled`` is False). Everything else is in setup.cfg."""
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

NOTICE = ("lazyarray: building without the compiled recorders ({}): the pure-Python path installs "
          "and works, recording ops ~2x slower")


class OptionalBuildExt(build_ext):
    """A failed compile leaves the pure-Python path, with a notice, not a failed install."""

    def run(self):
        try:
            super().run()
        except Exception as error:  # no compiler, no headers
            print(NOTICE.format(error), file=sys.stderr)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as error:
            print(NOTICE.format(error), file=sys.stderr)


def extensions():
    if os.environ.get("LAZYARRAY_PURE_PYTHON"):
        print(NOTICE.format("LAZYARRAY_PURE_PYTHON is set"), file=sys.stderr)
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print(NOTICE.format("Cython is not installed"), file=sys.stderr)
        return []
    return cythonize(["lazyarray/_recorders.pyx"], language_level=3, quiet=True)


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
