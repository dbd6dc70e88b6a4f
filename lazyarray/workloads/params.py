"""Model parameters: float32 numpy arrays by name, and their `la.parameter` versions."""
import numpy as np

import lazyarray as la


class Params:
    """Named arrays of one model; attribute access keeps model code close to the equations.
    Hashed by identity, so a cell may key on it."""

    def __init__(self, **arrays):
        vars(self).update(arrays)

    def items(self):
        return vars(self).items()

    def lazy(self):
        """The same arrays as `la.parameter`s: shared operands in a batching scope."""
        return Params(**{k: la.parameter(v, name=k) for k, v in self.items()})

    def __repr__(self):
        return "Params(" + ", ".join(f"{k}={v.shape}" for k, v in self.items()) + ")"


def init(seed, **shapes):
    """Arrays drawn in keyword order from one seeded generator: N(0, 1) * 0.1, float32."""
    rng = np.random.default_rng(seed)
    return Params(**{k: (rng.standard_normal(s) * 0.1).astype(np.float32) for k, s in shapes.items()})
