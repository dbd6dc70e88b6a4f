"""DyNet training baselines: the TreeLSTM and BiLSTM tagger written per instance as a DyNet user
writes them, one computation graph per minibatch (the instances' losses summed), then
`loss.backward(); trainer.update()`, with on-the-fly autobatching on (the agenda strategy,
DyNet's default) or off, chosen per graph. Importing fails where dynet is not installed.

    step = make_step("treelstm", params, optimizer="sgd", lr=0.05, autobatch=True)
    loss = step(trees)          # trains a DyNet copy of params: values(step.model)
    loss, grads = loss_and_grads("treelstm", params, trees)

DyNet clips gradients to a global norm of 5 by default; the trainers here have it off, so that
they compute what the other baselines compute. Its Adagrad divides by sqrt(G + eps), the others
by sqrt(G) + eps: with eps = 1e-20 here against their 1e-10, the two agree to float32 rounding
wherever G is well above 1e-20.
"""
from lazyarray.workloads.params import Params

# first: dynet_autobatch switches autobatching on before dynet's first import, which the
# inference benchmark's graphs (renewed without a choice) rely on
from .dynet_autobatch import Model, _lstm, _split

import dynet as dy  # noqa: E402  (isort: skip)

__all__ = ["MODELS", "make_step", "loss_and_grads", "values"]


def _graph(model, autobatch):
    """A new computation graph; DyNet 2.1 adds each parameter to it where first used."""
    dy.renew_cg(autobatching=autobatch)
    return Params(**model.stored)


def treelstm_loss(p, trees):
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
    return dy.esum(losses)


def bilstm_loss(p, sentences):
    H = p.bf.dim()[0][0] // 4
    losses = []
    for s in sentences:
        xs = [p.E[w] for w in s.words]
        runs = []
        for W, b, seq in ((p.Wf, p.bf, xs), (p.Wb, p.bb, xs[::-1])):
            h = c = dy.zeros(H)
            hs = []
            for x in seq:
                h, c = _lstm(W, b, x, h, c)
                hs.append(h)
            runs.append(hs)
        for hf, hb, tag in zip(runs[0], runs[1][::-1], s.tags):
            hidden = dy.tanh(p.W_mlp * dy.concatenate([hf, hb]) + p.b_mlp)
            losses.append(dy.pickneglogsoftmax(p.W_out * hidden + p.b_out, tag))
    return dy.esum(losses)


MODELS = {"treelstm": treelstm_loss, "bilstm": bilstm_loss}


def _trainer(name, collection, lr):
    if name == "sgd":
        trainer = dy.SimpleSGDTrainer(collection, learning_rate=lr)
    elif name == "adagrad":
        trainer = dy.AdagradTrainer(collection, learning_rate=lr, eps=1e-20)
    else:
        raise ValueError(f"unknown optimizer {name!r}: choose 'sgd' or 'adagrad'")
    trainer.set_clip_threshold(0)
    return trainer


def make_step(name, params, optimizer="sgd", lr=0.05, autobatch=True):
    """`step(instances) -> loss`: builds the minibatch's graph, runs forward and backward and
    the trainer's update on a DyNet copy of `params` (`step.model`; see `values`)."""
    model = Model(params)
    trainer = _trainer(optimizer, model.collection, lr)

    def step(instances):
        loss = MODELS[name](_graph(model, autobatch), instances)
        value = loss.value()
        loss.backward()
        trainer.update()
        return value

    step.model = model
    return step


def loss_and_grads(name, params, instances, autobatch=True):
    """(summed loss, {parameter name: dense gradient}) on a fresh DyNet copy of `params`."""
    model = Model(params)
    loss = MODELS[name](_graph(model, autobatch), instances)
    value = loss.value()
    loss.backward()
    return value, {k: v.grad_as_array() for k, v in model.stored.items()}


def values(model):
    """The current parameter values of a DyNet copy, as numpy Params."""
    return Params(**{k: v.as_array() for k, v in model.stored.items()})
