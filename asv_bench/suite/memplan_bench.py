"""Planning cost of memplan: layout on TreeLSTM- and LSTM-like batch families, and raw
PQ-tree reduces.  Inputs are built in setup; only planning is timed."""

import memplan
from memplan.synthetic import bilstm_chains, lstm_chains


def tree_family(nvars, seed=0):
    """TreeLSTM-like: random binary trees of 5–40 leaves; one leaf batch (h, x) and one
    (h, h_left, h_right) batch per height, as a depth scheduler would batch them."""
    import random

    rng = random.Random(seed)
    ids = iter(range(nvars))
    leaf_h, leaf_x, by_height = [], [], {}

    def build(leaves):
        stack, done = [(leaves, False)], []
        while stack:                            # post-order without recursion
            size, expanded = stack.pop()
            if size == 1:
                leaf_h.append(next(ids))
                leaf_x.append(next(ids))
                done.append((leaf_h[-1], 0))
            elif expanded:
                (right, hr), (left, hl) = done.pop(), done.pop()
                h, height = next(ids), max(hl, hr) + 1
                res, ls, rs = by_height.setdefault(height, ([], [], []))
                res.append(h)
                ls.append(left)
                rs.append(right)
                done.append((h, height))
            else:
                k = rng.randint(1, size - 1)
                stack += [(size, True), (size - k, False), (k, False)]

    while True:
        leaves = rng.randint(5, 40)
        if len(leaf_h) * 3 + leaves * 3 > nvars:
            break
        build(leaves)
    return nvars, [(leaf_h, leaf_x)] + [by_height[h] for h in sorted(by_height)]


def chain_family(nvars, seed=0, sequences=64):
    """LSTM-like: sequences sorted by length; step t is (h_t, h_{t-1}, x_t) over the
    sequences still running."""
    import random

    rng = random.Random(seed)
    lengths = sorted((rng.randint(5, 60) for _ in range(sequences)), reverse=True)
    scale = (nvars - sequences) / (2 * sum(lengths))
    lengths = [max(1, int(length * scale)) for length in lengths]
    _, batches = lstm_chains(lengths)
    return nvars, batches


def bilstm_family(nvars, seed=0, sequences=64):
    """BiLSTM-like, with conflicts: ragged sequences whose word vectors feed a forward and a
    backward chain, (h_t, h_{t-1}, x) per step and direction; the forward step t wants the
    t-th words consecutive, the backward one the t-th from the end, so the heavier (fuller)
    steps must win."""
    import random

    rng = random.Random(seed)
    lengths = sorted((rng.randint(5, 60) for _ in range(sequences)), reverse=True)
    scale = (nvars - 2 * sequences) / (3 * sum(lengths))
    lengths = [max(1, int(length * scale)) for length in lengths]
    _, batches = bilstm_chains(lengths)
    return nvars, batches


FAMILIES = {"tree": tree_family, "chain": chain_family, "bilstm": bilstm_family}


class Layout:
    params = ([1_000, 10_000, 100_000], ["tree", "chain", "bilstm"])
    param_names = ["variables", "family"]
    timeout = 300

    def setup(self, variables, family):
        self.n, self.batches = FAMILIES[family](variables)

    def time_layout(self, variables, family):
        memplan.layout(self.n, self.batches)


class PQTreeReduce:
    params = [1_000, 10_000, 100_000]
    param_names = ["leaves"]
    timeout = 300

    def setup(self, leaves):
        import random

        rng = random.Random(0)
        hidden = list(range(leaves))
        rng.shuffle(hidden)
        self.subsets = []
        for _ in range(leaves // 4):            # intervals of a hidden order: all succeed
            a = rng.randrange(leaves - 1)
            b = min(leaves, a + rng.randint(2, 64))
            self.subsets.append(hidden[a:b])

    def time_pqtree_reduce(self, leaves):
        tree = memplan.PQTree(leaves)
        for s in self.subsets:
            tree.reduce(s)
