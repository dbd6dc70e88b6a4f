"""Chain models over SST sentences: the BiLSTM tagger, the BiLSTM tagger with character-built
word vectors, Var-LSTM and LSTM-NMT."""
import lazyarray as la

from .params import init
from .cells import lstm_cell, nll, zero_state
from .lattices import ALPHABET, CHAR_IDS
from .trees import CLASSES


def run_lstm(W, b, xs, h=None, c=None, step=lstm_cell):
    """Hidden states of an LSTM over xs (from zeros unless h, c given), and the last cell;
    `step` is `lstm_cell` or the same step as a `la.cell`."""
    if h is None:
        h = c = zero_state(b.shape[0] // 4)
    hs = []
    for x in xs:
        h, c = step(W, b, x, h, c)
        hs.append(h)
    return hs, c


def mlp_output(p, h):
    """logits = W_out tanh(W_mlp h + b_mlp) + b_out."""
    return p.W_out @ la.tanh(p.W_mlp @ h + p.b_mlp) + p.b_out


# BiLSTM tagger (Huang et al. 2015): tags are the leaves' sentiment labels

def bilstm_params(H, vocab, seed=0):
    return init(seed, E=(vocab, H), Wf=(4 * H, 2 * H), bf=(4 * H,), Wb=(4 * H, 2 * H),
                  bb=(4 * H,), W_mlp=(H, 2 * H), b_mlp=(H,), W_out=(CLASSES, H), b_out=(CLASSES,))


def token_loss(p, forward, backward, tag):
    return nll(mlp_output(p, la.concatenate([forward, backward])), tag)


def tagger_loss(p, xs, tags, step=lstm_cell, token_loss=token_loss):
    """The tagger over input vectors xs: forward and backward LSTMs, an MLP per token, the
    summed loss (`step`, `token_loss`: the same functions as cells, in cell-style code)."""
    fwd, _ = run_lstm(p.Wf, p.bf, xs, step=step)
    bwd, _ = run_lstm(p.Wb, p.bb, xs[::-1], step=step)
    return la.sum(la.stack([token_loss(p, f, b, tag) for f, b, tag in zip(fwd, bwd[::-1], tags)]))


def bilstm_loss(p, sentence):
    return tagger_loss(p, [p.E[w] for w in sentence.words], sentence.tags)


# BiLSTM tagger with character-built word vectors (DyNet Table 1's "BiLSTM w/ char"; Ling et al.
# 2015): for word w_t spelled c_1..c_m (lattices.CHAR_IDS, 0 for other characters),
# cf_t = last h of an LSTM (Wcf, bcf) over C[c_1], ..., C[c_m], cb_t = last h of one (Wcb, bcb)
# over C[c_m], ..., C[c_1]; x_t = [E[w_t]; cf_t; cb_t] (3H); then the BiLSTM tagger above over x
# (Wf, Wb: 4H x 4H), same tags, outputs and loss. A batch nests variable-length chains
# (characters) inside others (words), and nothing is read before the end: no forcing.

class CharSentence:
    """A sentence's word ids, each word's character ids (lattices.CHAR_IDS) and the tags."""

    __slots__ = ("index", "words", "chars", "tags")

    def __init__(self, index, words, chars, tags):
        self.index, self.words, self.chars, self.tags = index, words, chars, tags

    def __len__(self):
        return len(self.words)


def char_sentences(trees):
    return [CharSentence(t.index, tuple(t.leaf_words.tolist()),
                         tuple(tuple(CHAR_IDS.get(ch, 0) for ch in token) for token in t.tokens),
                         tuple(t.leaf_labels.tolist())) for t in trees]


def chartagger_params(H, vocab, seed=0):
    """Characters, words and all LSTM states are H wide; the tagger reads [E[w]; cf; cb] (3H)."""
    return init(seed, E=(vocab, H), C=(len(ALPHABET) + 1, H), Wcf=(4 * H, 2 * H), bcf=(4 * H,),
                  Wcb=(4 * H, 2 * H), bcb=(4 * H,), Wf=(4 * H, 4 * H), bf=(4 * H,), Wb=(4 * H, 4 * H),
                  bb=(4 * H,), W_mlp=(H, 2 * H), b_mlp=(H,), W_out=(CLASSES, H), b_out=(CLASSES,))


def char_word(p, word, chars, step=lstm_cell):
    """[E[w]; cf; cb]: cf, cb the last states of the character LSTMs read forward and backward."""
    xs = [p.C[ch] for ch in chars]
    fwd, _ = run_lstm(p.Wcf, p.bcf, xs, step=step)
    bwd, _ = run_lstm(p.Wcb, p.bcb, xs[::-1], step=step)
    return la.concatenate([p.E[word], fwd[-1], bwd[-1]])


def chartagger_loss(p, sentence, step=lstm_cell, token_loss=token_loss):
    xs = [char_word(p, w, chars, step) for w, chars in zip(sentence.words, sentence.chars)]
    return tagger_loss(p, xs, sentence.tags, step, token_loss)


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
