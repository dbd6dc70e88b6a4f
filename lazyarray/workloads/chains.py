"""Chain models over SST sentences: the BiLSTM tagger, Var-LSTM and LSTM-NMT."""
import lazyarray as la

from .params import init
from .cells import lstm_cell, nll, zero_state
from .trees import CLASSES


def run_lstm(W, b, xs, h=None, c=None):
    """Hidden states of an LSTM over xs (from zeros unless h, c given), and the last cell."""
    if h is None:
        h = c = zero_state(b.shape[0] // 4)
    hs = []
    for x in xs:
        h, c = lstm_cell(W, b, x, h, c)
        hs.append(h)
    return hs, c


def mlp_output(p, h):
    """logits = W_out tanh(W_mlp h + b_mlp) + b_out."""
    return p.W_out @ la.tanh(p.W_mlp @ h + p.b_mlp) + p.b_out


# BiLSTM tagger (Huang et al. 2015): tags are the leaves' sentiment labels

def bilstm_params(H, vocab, seed=0):
    return init(seed, E=(vocab, H), Wf=(4 * H, 2 * H), bf=(4 * H,), Wb=(4 * H, 2 * H),
                  bb=(4 * H,), W_mlp=(H, 2 * H), b_mlp=(H,), W_out=(CLASSES, H), b_out=(CLASSES,))


def bilstm_loss(p, sentence):
    xs = [p.E[w] for w in sentence.words]
    fwd, _ = run_lstm(p.Wf, p.bf, xs)
    bwd, _ = run_lstm(p.Wb, p.bb, xs[::-1])
    return la.sum(la.stack([nll(mlp_output(p, la.concatenate([f, b])), tag)
                            for f, b, tag in zip(fwd, bwd[::-1], sentence.tags)]))


# Var-LSTM (Cavs): one LSTM per variable-length sequence

def varlstm_params(H, vocab, seed=0):
    return init(seed, E=(vocab, H), W=(4 * H, 2 * H), b=(4 * H,))


def varlstm_final(p, sentence):
    """The last hidden state; a scope's result is the sum of them."""
    hs, _ = run_lstm(p.W, p.b, [p.E[w] for w in sentence.words])
    return hs[-1]


# LSTM-NMT: encoder-decoder, teacher-forced on the reversed sentence

def lstmnmt_params(H, vocab, seed=0):
    """E_tgt has one extra row, the begin-of-sentence input (id `vocab`)."""
    return init(seed, E_src=(vocab, H), E_tgt=(vocab + 1, H), W_enc=(4 * H, 2 * H),
                  b_enc=(4 * H,), W_dec=(4 * H, 2 * H), b_dec=(4 * H,), W_mlp=(H, H), b_mlp=(H,),
                  W_out=(vocab, H), b_out=(vocab,))


def lstmnmt_loss(p, sentence):
    source = list(sentence.words)
    target = source[::-1]
    enc, c = run_lstm(p.W_enc, p.b_enc, [p.E_src[w] for w in source])
    bos = p.E_tgt.shape[0] - 1
    dec, _ = run_lstm(p.W_dec, p.b_dec, [p.E_tgt[w] for w in [bos] + target[:-1]], enc[-1], c)
    return la.sum(la.stack([nll(mlp_output(p, h), y) for h, y in zip(dec, target)]))
