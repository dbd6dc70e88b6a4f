"""``python -m lazyarray train``: the TreeLSTM sentiment model of WORKLOADS.md (one cell per tree
node, a loss at every node) trained on the bundled SST train split with Adagrad, the way the
Tree-LSTM paper trains it (minibatches of 25 trees, learning rate 0.05). Each epoch prints the
mean loss, dev root accuracy, trees per second, and one minibatch's forward and backward timed
batched and eagerly (the same code outside a scope). ``benchmarks/train_torch.py`` has a
PyTorch reference of the same run (same initialisation, data order and optimizer) whose first
losses this one matches."""
from __future__ import annotations

import argparse
import time

import numpy as np

import lazyarray as la
from lazyarray.workloads import WORKLOADS, load_sst
from lazyarray.workloads.cell_style import treelstm_loss, treelstm_root

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover - tqdm is a dependency; a bare loop without it
    def tqdm(iterable, **_):
        return iterable


def batches(n, size, seed, epoch=0):
    """Minibatches of indices: a seeded permutation per epoch, in consecutive slices (epoch 0's
    permutation is ``default_rng(seed)``'s, as the PyTorch reference takes it)."""
    order = np.random.default_rng(seed + epoch).permutation(n)
    return [order[k:k + size] for k in range(0, n, size)]


def batch_loss(params, trees):
    """The mean over trees of the loss summed over each tree's nodes."""
    return la.sum(la.stack([treelstm_loss(params, t) for t in trees])) / len(trees)


def train_step(params, optimizer, trees) -> float:
    with la.batching():
        loss = batch_loss(params, trees)
        loss.backward()
    optimizer.step()
    return float(loss)


def accuracy(params, trees, chunk=256) -> float:
    """Share of trees whose root's predicted label is right (argmax of W_out h + b_out)."""
    right = 0
    for k in range(0, len(trees), chunk):
        part = trees[k:k + chunk]
        with la.batching():
            logits = la.stack([params.W_out @ treelstm_root(params, t)[0] + params.b_out for t in part])
        right += int((np.asarray(logits).argmax(axis=1) == [t.root.label for t in part]).sum())
    return right / len(trees)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare(params, optimizer, trees):
    """(batched, eager) seconds of one minibatch's forward and backward; the gradients are
    dropped after (no update)."""
    def batched():
        with la.batching():
            batch_loss(params, trees).backward()

    def eager():
        batch_loss(params, trees).backward()

    times = _timed(batched), _timed(eager)
    optimizer.zero_grad()
    return times


def train(epochs=5, hidden=128, batch=25, lr=0.05, seed=0, limit=None, log=print):
    """Train; returns (params, per-epoch records, per-step losses)."""
    w = WORKLOADS["treelstm"]
    params = w.init(H=hidden, seed=seed).lazy()
    train_trees, dev = load_sst("train"), load_sst("dev")
    if limit:
        train_trees = train_trees[:limit]
    majority = np.bincount([t.root.label for t in dev]).max() / len(dev)
    optimizer = la.optim.Adagrad([p for _, p in params.items()], lr=lr)
    records, losses = [], []
    for epoch in range(epochs):
        start, total = time.perf_counter(), 0.0
        for idx in tqdm(batches(len(train_trees), batch, seed, epoch), desc=f"epoch {epoch + 1}", leave=False):
            loss = train_step(params, optimizer, [train_trees[i] for i in idx])
            losses.append(loss)
            total += loss * len(idx)
        seconds = time.perf_counter() - start
        dev_accuracy = accuracy(params, dev)
        batched, eager = compare(params, optimizer, train_trees[:batch])
        record = dict(epoch=epoch + 1, loss=total / len(train_trees), dev_accuracy=dev_accuracy, majority=majority,
                      trees_per_second=len(train_trees) / seconds, batched_ms=batched * 1e3, eager_ms=eager * 1e3)
        records.append(record)
        log(f"epoch {epoch + 1}: loss {record['loss']:.4f}, dev root accuracy {dev_accuracy:.1%} (majority "
            f"class {majority:.1%}), {record['trees_per_second']:,.0f} trees/s; one minibatch forward+backward: "
            f"batched {batched * 1e3:.1f} ms, eager {eager * 1e3:.1f} ms ({eager / batched:.1f}x)")
    return params, records, losses


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lazyarray train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=128, help="hidden size H")
    parser.add_argument("--batch", type=int, default=25, help="trees per minibatch")
    parser.add_argument("--lr", type=float, default=0.05, help="Adagrad's learning rate")
    parser.add_argument("--seed", type=int, default=0, help="initialisation and data order")
    parser.add_argument("--limit", type=int, default=None, help="train on the first N trees only")
    args = parser.parse_args(argv)
    print(f"TreeLSTM sentiment (SST, {args.limit or 8543} train trees, H={args.hidden}), Adagrad lr {args.lr}, "
          f"{args.batch} trees per step, 1 BLAS thread")
    train(args.epochs, args.hidden, args.batch, args.lr, args.seed, args.limit)
    return 0
