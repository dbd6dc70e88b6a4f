"""PyTorch eager, one instance at a time: the benchmarked models as a PyTorch user writes them.
Imported only where torch is installed; lazyarray never depends on it."""
import torch

from lazyarray.workloads.params import Params
from lazyarray.workloads.parser import Configuration, margin_pair


def tensors(params):
    return Params(**{k: torch.from_numpy(v) for k, v in params.items()})


def _nll(logits, label):
    return -torch.log_softmax(logits, 0)[label]


def _lstm(W, b, x, h, c):
    i, f, o, u = (W @ torch.cat([x, h]) + b).chunk(4)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(u)
    return torch.sigmoid(o) * torch.tanh(c), c


def treelstm(p, trees):
    def encode(node, losses):
        if node.is_leaf:
            i, o, u = (p.W_leaf @ p.E[node.word] + p.b_leaf).chunk(3)
            c = torch.sigmoid(i) * torch.tanh(u)
        else:
            hl, cl = encode(node.left, losses)
            hr, cr = encode(node.right, losses)
            i, fl, fr, o, u = (p.U @ torch.cat([hl, hr]) + p.b).chunk(5)
            c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cl + torch.sigmoid(fr) * cr
        h = torch.sigmoid(o) * torch.tanh(c)
        losses.append(_nll(p.W_out @ h + p.b_out, node.label))
        return h, c

    total = 0
    for tree in trees:
        losses = []
        encode(tree.root, losses)
        total = total + torch.stack(losses).sum()
    return total


def treefc(p, trees):
    def encode(node):
        if node.is_leaf:
            return p.E[node.word]
        return torch.relu(p.W @ torch.cat([encode(node.left), encode(node.right)]) + p.b)

    return torch.stack([encode(t.root) for t in trees]).sum(0)


def _run(W, b, xs):
    h = c = torch.zeros(b.shape[0] // 4)
    hs = []
    for x in xs:
        h, c = _lstm(W, b, x, h, c)
        hs.append(h)
    return hs


def _tagger(p, xs, tags):
    fwd, bwd = _run(p.Wf, p.bf, xs), _run(p.Wb, p.bb, xs[::-1])[::-1]
    return sum(_nll(p.W_out @ torch.tanh(p.W_mlp @ torch.cat([hf, hb]) + p.b_mlp) + p.b_out, tag)
               for hf, hb, tag in zip(fwd, bwd, tags))


def bilstm(p, sentences):
    return sum(_tagger(p, [p.E[w] for w in s.words], s.tags) for s in sentences)


def chartagger(p, sentences):
    total = 0
    for s in sentences:
        xs = []
        for w, chars in zip(s.words, s.chars):
            cs = [p.C[ch] for ch in chars]
            xs.append(torch.cat([p.E[w], _run(p.Wcf, p.bcf, cs)[-1], _run(p.Wcb, p.bcb, cs[::-1])[-1]]))
        total = total + _tagger(p, xs, s.tags)
    return total


def parse(p, sentence):
    """One greedy parse, as lazyarray.workloads.parser.parse: (transitions, summed hinge loss)."""
    xs = [p.E[w] for w in sentence.words]
    fwd, bwd = _run(p.Wf, p.bf, xs), _run(p.Wb, p.bb, xs[::-1])[::-1]
    vectors = [torch.cat([f, b]) for f, b in zip(fwd, bwd)] + [p.root]
    config = Configuration(len(sentence))
    transitions, losses = [], []
    while not config.terminal:
        features = torch.cat([p.pad if i is None else vectors[i] for i in config.features()])
        scores = p.W_out @ torch.tanh(p.W_mlp @ features + p.b_mlp) + p.b_out
        values = scores.detach().numpy()
        legal = config.legal()
        pair = margin_pair(values, config.costs(sentence, legal))
        if pair is not None:
            losses.append(torch.relu(1 - scores[pair[0]] + scores[pair[1]]))
        best = max(legal, key=values.__getitem__)
        config.apply(best)
        transitions.append(best)
    return transitions, torch.stack(losses).sum() if losses else torch.zeros(())


def parser(p, sentences):
    return sum(parse(p, s)[1] for s in sentences)


def latticelstm(p, lattices):
    H = p.C.shape[1]
    total = 0
    for lat in lattices:
        incoming = [[] for _ in lat.chars]
        starting = [[] for _ in lat.chars]
        for s, e, w in lat.words:
            starting[s].append((e, w))
        h = c = torch.zeros(H)
        for j, (ch, tag) in enumerate(zip(lat.chars, lat.tags)):
            x = p.C[ch]
            i, f, o, u = (p.W_c @ torch.cat([x, h]) + p.b_c).chunk(4)
            if incoming[j]:
                gates = torch.sigmoid(torch.stack(
                    [i] + [p.W_l @ torch.cat([x, cw]) + p.b_l for cw in incoming[j]]))
                c = (torch.softmax(gates, 0) * torch.stack([torch.tanh(u), *incoming[j]])).sum(0)
            else:
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(u)
            h = torch.sigmoid(o) * torch.tanh(c)
            for e, w in starting[j]:
                wi, wf, wu = (p.W_w @ torch.cat([p.E_w[w], h]) + p.b_w).chunk(3)
                incoming[e - 1].append(torch.sigmoid(wf) * c + torch.sigmoid(wi) * torch.tanh(wu))
            total = total + _nll(p.W_out @ h + p.b_out, tag)
    return total


MODELS = {"treelstm": treelstm, "treefc": treefc, "bilstm": bilstm, "chartagger": chartagger, "parser": parser,
          "latticelstm": latticelstm}
