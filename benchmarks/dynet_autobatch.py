"""DyNet with on-the-fly autobatching (Neubig et al. 2017): the benchmarked models as a DyNet
user writes them, one computation graph per scope. Imported only where dynet is installed
(autobatching must be switched on before dynet's first import)."""
import ctypes
import ctypes.util

import dynet_config

dynet_config.set(autobatch=1)
import dynet as dy  # noqa: E402

from lazyarray.workloads.params import Params  # noqa: E402
from lazyarray.workloads.parser import Configuration, margin_pair  # noqa: E402

LOOKUP_TABLES = {"E", "C", "E_w"}


def _ieee_subnormals():
    """DyNet's wheel is built with -ffast-math, whose startup code makes the importing thread's
    CPU flush subnormal floats to zero: every numpy result in the process after the import
    (lazyarray's, the other baselines', the tests' subnormal floats) would change. glibc's
    ``fesetenv(FE_DFL_ENV)`` puts the default floating-point environment back."""
    libm = ctypes.util.find_library("m")
    if libm is not None:
        ctypes.CDLL(libm).fesetenv(ctypes.c_void_p(-1))     # FE_DFL_ENV is (const fenv_t *) -1


_ieee_subnormals()


class Model:
    """Copies of numpy Params in a ParameterCollection (which owns them: keep it alive)."""

    def __init__(self, params):
        self.collection = pc = dy.ParameterCollection()
        self.stored = {k: pc.lookup_parameters_from_numpy(v) if k in LOOKUP_TABLES
                       else pc.add_parameters(v.shape, init=dy.NumpyInitializer(v))
                       for k, v in params.items()}


def _graph(model):
    """Starts a computation graph; parameters as expressions, lookup tables as they are."""
    dy.renew_cg()
    return Params(**{k: v if k in LOOKUP_TABLES else dy.parameter(v) for k, v in model.stored.items()})


def _split(v, k):
    n = v.dim()[0][0] // k
    return [dy.pick_range(v, j * n, (j + 1) * n) for j in range(k)]


def _lstm(W, b, x, h, c):
    i, f, o, u = _split(W * dy.concatenate([x, h]) + b, 4)
    c = dy.cmult(dy.logistic(f), c) + dy.cmult(dy.logistic(i), dy.tanh(u))
    return dy.cmult(dy.logistic(o), dy.tanh(c)), c


def treelstm(model, trees):
    p = _graph(model)
    losses = []

    def encode(node):
        if node.is_leaf:
            i, o, u = _split(p.W_leaf * p.E[node.word] + p.b_leaf, 3)
            c = dy.cmult(dy.logistic(i), dy.tanh(u))
        else:
            hl, cl = encode(node.left)
            hr, cr = encode(node.right)
            i, fl, fr, o, u = _split(p.U * dy.concatenate([hl, hr]) + p.b, 5)
            c = (dy.cmult(dy.logistic(i), dy.tanh(u)) + dy.cmult(dy.logistic(fl), cl)
                 + dy.cmult(dy.logistic(fr), cr))
        h = dy.cmult(dy.logistic(o), dy.tanh(c))
        losses.append(dy.pickneglogsoftmax(p.W_out * h + p.b_out, node.label))
        return h, c

    for tree in trees:
        encode(tree.root)
    return dy.esum(losses).value()


def treefc(model, trees):
    p = _graph(model)

    def encode(node):
        if node.is_leaf:
            return p.E[node.word]
        return dy.rectify(p.W * dy.concatenate([encode(node.left), encode(node.right)]) + p.b)

    return dy.esum([encode(t.root) for t in trees]).npvalue()


def _run(W, b, xs):
    h = c = dy.zeros(b.dim()[0][0] // 4)
    hs = []
    for x in xs:
        h, c = _lstm(W, b, x, h, c)
        hs.append(h)
    return hs


def _bilstm(p, xs):
    """[hf_t; hb_t] for every t: the forward and the backward LSTM's states."""
    return list(zip(_run(p.Wf, p.bf, xs), _run(p.Wb, p.bb, xs[::-1])[::-1]))


def _tagger(p, xs, tags, losses):
    for (hf, hb), tag in zip(_bilstm(p, xs), tags):
        hidden = dy.tanh(p.W_mlp * dy.concatenate([hf, hb]) + p.b_mlp)
        losses.append(dy.pickneglogsoftmax(p.W_out * hidden + p.b_out, tag))


def bilstm(model, sentences):
    p = _graph(model)
    losses = []
    for s in sentences:
        _tagger(p, [p.E[w] for w in s.words], s.tags, losses)
    return dy.esum(losses).value()


def chartagger(model, sentences):
    p = _graph(model)
    losses = []
    for s in sentences:
        xs = []
        for w, chars in zip(s.words, s.chars):
            cs = [p.C[ch] for ch in chars]
            xs.append(dy.concatenate([p.E[w], _run(p.Wcf, p.bcf, cs)[-1], _run(p.Wcb, p.bcb, cs[::-1])[-1]]))
        _tagger(p, xs, s.tags, losses)
    return dy.esum(losses).value()


def parse(model, sentences):
    """DyNet's way to batch a parser (Neubig et al. 2017, §5): b parsers stepped together, each
    step's scores of every unfinished parser computed by one autobatched forward. Returns (each
    sentence's transitions, the summed hinge loss) as lazyarray.workloads.parser.parse."""
    p = _graph(model)
    vectors = [[dy.concatenate([f, b]) for f, b in _bilstm(p, [p.E[w] for w in s.words])] + [p.root]
               for s in sentences]
    configs = [Configuration(len(s)) for s in sentences]
    transitions, losses = [[] for _ in sentences], []
    live = list(range(len(sentences)))
    while live:
        scores = [p.W_out * dy.tanh(p.W_mlp * dy.concatenate(
            [p.pad if i is None else vectors[k][i] for i in configs[k].features()]) + p.b_mlp) + p.b_out
            for k in live]
        dy.forward(scores)
        for k, expr in zip(live, scores):
            values, config = expr.npvalue(), configs[k]
            legal = config.legal()
            pair = margin_pair(values, config.costs(sentences[k], legal))
            if pair is not None:
                losses.append(dy.rectify(1 - expr[pair[0]] + expr[pair[1]]))
            best = max(legal, key=values.__getitem__)
            config.apply(best)
            transitions[k].append(best)
        live = [k for k in live if not configs[k].terminal]
    return transitions, dy.esum(losses).value()


def parser(model, sentences):
    return parse(model, sentences)[1]


def latticelstm(model, lattices):
    p = _graph(model)
    H = p.b_l.dim()[0][0]
    losses = []
    for lat in lattices:
        incoming = [[] for _ in lat.chars]
        starting = [[] for _ in lat.chars]
        for s, e, w in lat.words:
            starting[s].append((e, w))
        h = c = dy.zeros(H)
        for j, (ch, tag) in enumerate(zip(lat.chars, lat.tags)):
            x = p.C[ch]
            i, f, o, u = _split(p.W_c * dy.concatenate([x, h]) + p.b_c, 4)
            if incoming[j]:
                gates = dy.logistic(dy.concatenate_cols(
                    [i] + [p.W_l * dy.concatenate([x, cw]) + p.b_l for cw in incoming[j]]))
                mixed = dy.cmult(dy.softmax(gates, d=1), dy.concatenate_cols([dy.tanh(u)] + incoming[j]))
                c = dy.sum_dim(mixed, [1])
            else:
                c = dy.cmult(dy.logistic(f), c) + dy.cmult(dy.logistic(i), dy.tanh(u))
            h = dy.cmult(dy.logistic(o), dy.tanh(c))
            for e, w in starting[j]:
                wi, wf, wu = _split(p.W_w * dy.concatenate([p.E_w[w], h]) + p.b_w, 3)
                incoming[e - 1].append(dy.cmult(dy.logistic(wf), c) + dy.cmult(dy.logistic(wi), dy.tanh(wu)))
            losses.append(dy.pickneglogsoftmax(p.W_out * h + p.b_out, tag))
    return dy.esum(losses).value()


MODELS = {"treelstm": treelstm, "treefc": treefc, "bilstm": bilstm, "chartagger": chartagger, "parser": parser,
          "latticelstm": latticelstm}
