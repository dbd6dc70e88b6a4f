"""Batch families with a known shape, for tests and benchmarks of the planner."""


def lstm_chains(lengths, first=0):
    """Sequences sorted by length; step t is (h_t, h_{t-1}, x_t) over the sequences still
    running. Returns (number of variables, batches)."""
    ids = iter(range(first, 10 ** 12))
    prev = [next(ids) for _ in lengths]
    batches = []
    for t in range(max(lengths)):
        live = [s for s, length in enumerate(lengths) if length > t]
        h = [next(ids) for _ in live]
        x = [next(ids) for _ in live]
        batches.append((h, [prev[s] for s in live], x))
        for s, v in zip(live, h):
            prev[s] = v
    return next(ids), batches
