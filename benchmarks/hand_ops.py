"""numpy pieces shared by the hand-batched baselines (rows are instances)."""
import numpy as np

__all__ = ["sigmoid", "nll_sum", "lstm_update", "gru_update"]


def sigmoid(x):
    """σ(x) = (1 + tanh(x / 2)) / 2: in float32 about 3x faster than scipy.special.expit."""
    y = np.tanh(x * np.float32(0.5))
    y += 1
    y *= 0.5
    return y


def nll_sum(logits, labels):
    """Sum over rows of -log_softmax(row)[label]; written out because scipy's log_softmax makes
    several passes over memory, which dominates for LSTM-NMT's vocabulary-sized rows."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    picked = shifted[np.arange(len(labels)), labels]
    return (np.log(np.exp(shifted).sum(axis=1)) - picked).sum(dtype=np.float32)


def lstm_update(gates, c):
    """New (h, c) from pre-activation gates i, f, o, u (one row per instance)."""
    i, f, o, u = np.split(gates, 4, axis=1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(u)
    return sigmoid(o) * np.tanh(c), c


def gru_update(xg, xh, Ug, Uh, h):
    """New h of a GRU given the input parts xg = W_g[:, :H] x + b_g, xh = W_h[:, :H] x + b_h and
    the recurrent weights Ug = W_g[:, H:], Uh = W_h[:, H:]."""
    z, r = np.split(sigmoid(xg + h @ Ug.T), 2, axis=1)
    return (1 - z) * h + z * np.tanh(xh + (r * h) @ Uh.T)
