"""Hand-batched numpy lattice models: at step j, the j-th character cells of all lattices still
running (sorted by length, as for chains) in one batch, mixing in the words that end there with
segment sums; then the word cells of all words starting at j in one batch."""
import numpy as np

from .hand_ops import gru_update, lstm_update, nll_sum, sigmoid


class LatticeBatch:
    """Lattices sorted by decreasing length, characters laid out as rows (see hand_chains.Chains).
    For step j: `ending[j]` = (word ids, their lattice ranks, segment starts, distinct ranks) of
    the words whose last character is j, grouped by rank; `starting[j]` = (word ids, ranks)."""

    def __init__(self, lattices):
        lengths = np.array([len(x) for x in lattices])
        order = np.argsort(-lengths, kind="stable")
        self.lengths = lengths[order]
        self.starts = np.cumsum(self.lengths) - self.lengths
        self.chars = np.concatenate([lattices[k].chars for k in order])
        self.tags = np.concatenate([lattices[k].tags for k in order])
        self.running = np.searchsorted(-self.lengths, -np.arange(self.lengths[0]), side="left")
        spans = [np.array(lattices[k].words, np.int64).reshape(-1, 3) for k in order]
        rank = np.repeat(np.arange(len(order)), [len(s) for s in spans])
        spans = np.concatenate(spans)
        self.lexicon_ids = spans[:, 2]
        self.ending = self._by_step(spans[:, 1] - 1, rank, segments=True)
        self.starting = self._by_step(spans[:, 0], rank, segments=False)

    def _by_step(self, step, rank, segments):
        order = np.lexsort((rank, step))
        bounds = np.searchsorted(step[order], np.arange(len(self.running) + 1))
        groups = []
        for j in range(len(self.running)):
            w = order[bounds[j]:bounds[j + 1]]
            r = rank[w]
            if segments:
                first = np.flatnonzero(np.diff(r, prepend=-1))
                groups.append((w, r, first, r[first]))
            else:
                groups.append((w, r))
        return groups

    def rows(self, j, n):
        return self.starts[:n] + j


def latticelstm(p, lattices):
    lb = LatticeBatch(lattices)
    H = p.C.shape[1]
    X = p.C[lb.chars]
    gates_x = X @ p.W_c[:, :H].T + p.b_c
    word_x = p.E_w[lb.lexicon_ids] @ p.W_w[:, :H].T + p.b_w
    c_word = np.empty((len(word_x), H), np.float32)
    h = np.zeros((len(lb.lengths), H), np.float32)
    c = np.zeros_like(h)
    out = np.empty_like(X)
    for j, n in enumerate(lb.running):
        rows = lb.rows(j, n)
        gates = gates_x[rows] + h[:n] @ p.W_c[:, H:].T
        w, r, first, mixed = lb.ending[j]
        if len(w):
            i, _, _, u = np.split(gates[mixed], 4, axis=1)
            gate_w = np.exp(sigmoid(np.concatenate([X[rows[r]], c_word[w]], axis=1) @ p.W_l.T + p.b_l))
            gate_c = np.exp(sigmoid(i))
            total = gate_c + np.add.reduceat(gate_w, first)
            c_mixed = (gate_c * np.tanh(u) + np.add.reduceat(gate_w * c_word[w], first)) / total
        h[:n], c[:n] = lstm_update(gates, c[:n])
        if len(w):
            c[mixed] = c_mixed
            h[mixed] = sigmoid(gates[mixed, 2 * H:3 * H]) * np.tanh(c_mixed)
        out[rows] = h[:n]
        w, r = lb.starting[j]
        if len(w):
            i, f, u = np.split(word_x[w] + h[r] @ p.W_w[:, H:].T, 3, axis=1)
            c_word[w] = sigmoid(f) * c[r] + sigmoid(i) * np.tanh(u)
    return nll_sum(out @ p.W_out.T + p.b_out, lb.tags)


def latticegru(p, lattices):
    lb = LatticeBatch(lattices)
    H = p.C.shape[1]
    X = p.C[lb.chars]
    xg, xh = X @ p.W_g[:, :H].T + p.b_g, X @ p.W_h[:, :H].T + p.b_h
    E = p.E_w[lb.lexicon_ids]
    wg, wh = E @ p.Ww_g[:, :H].T + p.bw_g, E @ p.Ww_h[:, :H].T + p.bw_h
    h_word = np.empty((len(E), H), np.float32)
    h = np.zeros((len(lb.lengths), H), np.float32)
    out = np.empty_like(X)
    for j, n in enumerate(lb.running):
        rows = lb.rows(j, n)
        w, r, first, mixed = lb.ending[j]
        if len(w):
            counts = np.diff(first, append=len(w))[:, None]
            h[mixed] = (h[mixed] + np.add.reduceat(h_word[w], first)) / (1 + counts)
        h[:n] = gru_update(xg[rows], xh[rows], p.W_g[:, H:], p.W_h[:, H:], h[:n])
        out[rows] = h[:n]
        w, r = lb.starting[j]
        if len(w):
            h_word[w] = gru_update(wg[w], wh[w], p.Ww_g[:, H:], p.Ww_h[:, H:], h[r])
    return nll_sum(out @ p.W_out.T + p.b_out, lb.tags)
