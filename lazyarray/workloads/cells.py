"""Recurrent cells and the per-token loss shared by the chain and lattice models."""
import numpy as np

import lazyarray as la


def zero_state(H):
    return la.array(np.zeros(H, np.float32))


def lstm_cell(W, b, x, h, c):
    """Standard LSTM step, gates i, f, o, u from W [x; h] + b."""
    i, f, o, u = la.split(W @ la.concatenate([x, h]) + b, 4)
    c = la.sigmoid(f) * c + la.sigmoid(i) * la.tanh(u)
    return la.sigmoid(o) * la.tanh(c), c


def gru_cell(W_g, b_g, W_h, b_h, x, h):
    """GRU step: z, r = σ(W_g [x; h] + b_g); h~ = tanh(W_h [x; r ⊙ h] + b_h)."""
    z, r = la.split(la.sigmoid(W_g @ la.concatenate([x, h]) + b_g), 2)
    h_new = la.tanh(W_h @ la.concatenate([x, r * h]) + b_h)
    return (1 - z) * h + z * h_new


def nll(logits, label):
    """-log p(label): the loss at one output node."""
    return -la.log_softmax(logits)[label]


def total(losses):
    """Sum of per-instance results (scalars, or vectors summed elementwise)."""
    return la.sum(la.stack(losses), axis=0)
