#!/usr/bin/python3
"""PyTorch baseline for bench/train: the same models, data, flags and JSON
line, so bench/compare_train.sh can put the two side by side.

Run with Debian's interpreter (/usr/bin/python3 has python3-torch 1.13 and
numpy). The loop is the fastest plain PyTorch one: the whole training set
as one tensor, a seeded permutation per epoch, minibatches by index
slicing (no DataLoader), torch.optim.SGD or Adam. Only the training loop is
timed. FLOPs are counted as bench/train.c counts them.
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
from torch import nn


def read_idx(path):
    """An IDX file, gzip'd or plain (by magic bytes), as a numpy array."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8,
                         offset=4 + 4 * ndim).reshape(dims)


def find(directory, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    raise SystemExit(f"torch_baseline: no {stem}[.gz] in {directory}")


def load(directory, train):
    prefix = "train" if train else "t10k"
    x = read_idx(find(directory, f"{prefix}-images-idx3-ubyte"))
    y = read_idx(find(directory, f"{prefix}-labels-idx1-ubyte"))
    x = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)
    return x, torch.from_numpy(y.astype(np.int64))


def build(spec, classes=10):
    """The zoo models of models/nn_zoo.h, PyTorch's default init."""
    base, _, mod = spec.partition("/")
    dropout = float(mod[len("dropout="):]) if mod else 0.0

    def act():
        return [nn.ReLU()] + ([nn.Dropout(dropout)] if dropout else [])

    if base == "logreg":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, classes))
    if base.startswith("mlp:"):
        layers, width = [nn.Flatten()], 784
        for h in map(int, base[4:].split(",")):
            layers += [nn.Linear(width, h)] + act()
            width = h
        return nn.Sequential(*layers, nn.Linear(width, classes))
    if base == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(7 * 7 * 64, 512), *act(),
            nn.Linear(512, classes))
    raise SystemExit(f"torch_baseline: unknown model {spec}")


def flops_per_example(model):
    """As bench/train.c: 2mnk per product, no input gradient for the first
    layer with parameters."""
    total, seen, hw = 0.0, False, 28 * 28
    for layer in model:
        if isinstance(layer, nn.MaxPool2d):
            hw //= 4
        if isinstance(layer, nn.Linear):
            m, n, k = 1, layer.out_features, layer.in_features
        elif isinstance(layer, nn.Conv2d):
            kh, kw = layer.kernel_size
            m, n, k = hw, layer.out_channels, kh * kw * layer.in_channels
        else:
            continue
        total += 2.0 * m * n * k * (3 if seen else 2)
        seen = True
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="logreg")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=1,
                   help="torch.set_num_threads (0 = all cores)")
    p.add_argument("--samples", type=int, default=60000)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()

    threads = a.threads if a.threads > 0 else os.cpu_count()
    torch.set_num_threads(threads)
    torch.manual_seed(a.seed)
    x, y = load(a.data, True)
    x, y = x[:a.samples].contiguous(), y[:a.samples].contiguous()
    tx, ty = load(a.data, False)
    model = build(a.model)
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr,
                              momentum=a.momentum)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(a.seed)
    n = x.shape[0]

    model.train()
    t0 = time.monotonic()
    for _ in range(a.epochs):
        order = torch.randperm(n, generator=gen)
        total = 0.0
        for first in range(0, n, a.batch):
            idx = order[first:first + a.batch]
            xb, yb = x[idx], y[idx]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
    seconds = time.monotonic() - t0

    model.eval()
    with torch.no_grad():
        correct, test_loss = 0, 0.0
        for first in range(0, tx.shape[0], 1000):
            z = model(tx[first:first + 1000])
            yb = ty[first:first + 1000]
            correct += (z.argmax(1) == yb).sum().item()
            test_loss += nn.functional.cross_entropy(
                z, yb, reduction="sum").item()
    examples = n * a.epochs
    print(json.dumps({
        "impl": "pytorch", "model": a.model, "batch": a.batch,
        "threads": threads, "samples": n, "epochs": a.epochs, "lr": a.lr,
        "optimizer": a.optimizer, "seconds": round(seconds, 4),
        "samples_per_s": round(examples / seconds, 1),
        "gflops": round(flops_per_example(model) * examples / seconds * 1e-9,
                        3),
        "train_loss": round(total / n, 5),
        "test_loss": round(test_loss / tx.shape[0], 5),
        "test_accuracy": round(correct / tx.shape[0], 4),
        "backend": "torch " + torch.__version__,
        # What the run let PyTorch use: ATen's own kernels, and oneDNN's
        # (its convolutions), which ATEN_CPU_CAPABILITY does not limit.
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY", ""),
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()
