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


def bilstm_chains(lengths):
    """Sequences sorted by length, their words feeding a forward and a backward chain: step t
    of a direction is (h_t, h_{t-1}, x) over the sequences still running, x the t-th word of
    each (from the end, backward).  The two directions want the words in conflicting orders.
    Returns (number of variables, batches)."""
    ids = iter(range(10 ** 12))
    words = [[next(ids) for _ in range(length)] for length in lengths]
    batches = []
    for backward in (False, True):
        prev = [next(ids) for _ in lengths]
        for t in range(max(lengths)):
            live = [s for s, length in enumerate(lengths) if length > t]
            h = [next(ids) for _ in live]
            x = [words[s][lengths[s] - 1 - t if backward else t] for s in live]
            batches.append((h, [prev[s] for s in live], x))
            for s, v in zip(live, h):
                prev[s] = v
    return next(ids), batches
