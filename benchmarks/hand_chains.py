"""Hand-batched numpy chain models, in the two forms people write.

`sorted`: sentences sorted by decreasing length and laid out token after token, so that the
sentences still running at step t are a prefix: each step runs only those, no padding (the
fastest form). `padded`: a (B, T) grid with a mask, every step runs all B rows (the common form).
Both project all inputs once (W [x; h] = W_x x + W_h h), leaving one matmul per step.
"""
import numpy as np

from .hand_ops import lstm_update, nll_sum

OUTPUT_ROWS = 64  # LSTM-NMT's vocabulary-sized logits in blocks that stay in cache (2x faster)


class Chains:
    """Sequences of ids (a sentence's words, a word's characters) sorted by decreasing length;
    token k of sorted sequence s is row starts[s] + k; `tags`, when given, are laid out alike."""

    def __init__(self, sequences, tags=None):
        lengths = np.array([len(s) for s in sequences])
        self.order = np.argsort(-lengths, kind="stable")
        self.lengths = lengths[self.order]
        self.starts = np.cumsum(self.lengths) - self.lengths
        self.words = np.concatenate([sequences[s] for s in self.order])
        if tags is not None:
            self.tags = np.concatenate([tags[s] for s in self.order])
        # running[t]: how many sequences are longer than t
        self.running = np.searchsorted(-self.lengths, -np.arange(self.lengths[0]), side="left")

    @classmethod
    def of(cls, sentences):
        return cls([s.words for s in sentences], [s.tags for s in sentences])

    def layout(self):
        """For each row of this layout, the row of the same token with the sequences in their
        given order, one after another."""
        unsorted = np.empty_like(self.lengths)
        unsorted[self.order] = self.lengths
        first = (np.cumsum(unsorted) - unsorted)[self.order]
        return np.repeat(first - self.starts, self.lengths) + np.arange(self.lengths.sum())

    def rows(self, t, n, reverse=False):
        """Rows of step t of the first n sentences (reverse: counting from each one's end)."""
        return self.starts[:n] + (self.lengths[:n] - 1 - t if reverse else t)


def lstm_sorted(chains, X, W, b, reverse=False, h=None, c=None):
    """Hidden states (one row per token) of an LSTM over every sentence, and the final h, c
    (rows in sorted order)."""
    H, D = W.shape[0] // 4, X.shape[1]
    gates_x = X @ W[:, :D].T + b
    U = W[:, D:]
    if h is None:
        h = np.zeros((len(chains.lengths), H), np.float32)
        c = np.zeros_like(h)
    out = np.empty((len(X), H), np.float32)
    for t, n in enumerate(chains.running):
        rows = chains.rows(t, n, reverse)
        h[:n], c[:n] = lstm_update(gates_x[rows] + h[:n] @ U.T, c[:n])
        out[rows] = h[:n]
    return out, h, c


def _mlp_logits(p, h):
    return np.tanh(h @ p.W_mlp.T + p.b_mlp) @ p.W_out.T + p.b_out


def bilstm_sorted(p, sentences):
    ch = Chains.of(sentences)
    return _tagger_sorted(p, ch, p.E[ch.words])


def _tagger_sorted(p, ch, X):
    """The tagger's loss over input vectors X laid out as ch."""
    fwd, _, _ = lstm_sorted(ch, X, p.Wf, p.bf)
    bwd, _, _ = lstm_sorted(ch, X, p.Wb, p.bb, reverse=True)
    return nll_sum(_mlp_logits(p, np.concatenate([fwd, bwd], axis=1)), ch.tags)


def _lstm_padded(X, mask, W, b, reverse=False):
    B, T, H = X.shape
    gates_x = X @ W[:, :H].T + b
    U = W[:, H:]
    h = np.zeros((B, H), np.float32)
    c = np.zeros_like(h)
    out = np.empty_like(X)
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        h_new, c_new = lstm_update(gates_x[:, t] + h @ U.T, c)
        m = mask[:, t]
        h = np.where(m, h_new, h)
        c = np.where(m, c_new, c)
        out[:, t] = h
    return out


def bilstm_padded(p, sentences):
    T = max(len(s) for s in sentences)
    words = np.zeros((len(sentences), T), np.int64)
    tags = np.zeros_like(words)
    for k, s in enumerate(sentences):
        words[k, :len(s)], tags[k, :len(s)] = s.words, s.tags
    mask = (np.arange(T) < np.array([len(s) for s in sentences])[:, None])[:, :, None]
    X = p.E[words]
    fwd = _lstm_padded(X, mask, p.Wf, p.bf)
    bwd = _lstm_padded(X, mask, p.Wb, p.bb, reverse=True)
    m = mask[:, :, 0]
    return nll_sum(_mlp_logits(p, np.concatenate([fwd[m], bwd[m]], axis=1)), tags[m])


def chartagger_sorted(p, sentences):
    """The character LSTMs over every word of the batch at once (words sorted by length, each
    direction's last states unsorted back), then the tagger as bilstm_sorted."""
    words = Chains([chars for s in sentences for chars in s.chars])
    X = p.C[words.words]
    finals = []
    for W, b, reverse in ((p.Wcf, p.bcf, False), (p.Wcb, p.bcb, True)):
        _, h, _ = lstm_sorted(words, X, W, b, reverse)
        finals.append(np.empty_like(h))
        finals[-1][words.order] = h
    ch = Chains.of(sentences)
    vectors = np.concatenate([p.E[np.concatenate([s.words for s in sentences])], *finals], axis=1)
    return _tagger_sorted(p, ch, vectors[ch.layout()])


def varlstm_sorted(p, sentences):
    ch = Chains.of(sentences)
    _, h, _ = lstm_sorted(ch, p.E[ch.words], p.W, p.b)
    return h.sum(axis=0)


def lstmnmt_sorted(p, sentences):
    """Target = source reversed, so the decoder reuses the encoder's layout: decoder input k
    of a sentence is begin-of-sentence, then source tokens from the end."""
    ch = Chains.of(sentences)
    _, h, c = lstm_sorted(ch, p.E_src[ch.words], p.W_enc, p.b_enc)
    bos = len(p.E_tgt) - 1
    target = ch.words[_reversed_rows(ch)]
    inputs = np.roll(target, 1)
    inputs[ch.starts] = bos
    dec, _, _ = lstm_sorted(ch, p.E_tgt[inputs], p.W_dec, p.b_dec, h=h, c=c)
    return sum(nll_sum(_mlp_logits(p, dec[k:k + OUTPUT_ROWS]), target[k:k + OUTPUT_ROWS])
               for k in range(0, len(dec), OUTPUT_ROWS))


def _reversed_rows(ch):
    """For each row, the row of the same sentence counted from the other end."""
    first = np.repeat(ch.starts, ch.lengths)
    return 2 * first + np.repeat(ch.lengths, ch.lengths) - 1 - np.arange(len(first))
