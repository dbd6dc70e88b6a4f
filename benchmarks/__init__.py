"""The benchmarks' own code: the competitors' versions of the reference workloads (hand-batched
numpy, PyTorch eager, DyNet autobatch) and the driver that times them against lazyarray
(``python -m benchmarks``). Only the benchmarks and their tests need it, so it is run from the
repository root, which puts it on the path, and is never installed with the ``lazyarray`` wheel.
"""
