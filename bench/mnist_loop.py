"""PyTorch 1.13's bare MNIST training loop: the peer of examples/mnist:train.

The same data (data/mnist IDX files, normalised with 0.1307/0.3081 once,
up front), the tutorial ConvNet (tools/pyloom/loom_torch.py), batch 128, SGD
lr 0.01 momentum 0.9, a fresh permutation each epoch, no DataLoader and no
evaluation: the least a PyTorch user could run.  Prints one line:
  torch mnist_loop epochs=<E> batch=<B> threads=<T> images=<N> training_loops_s=<seconds>
bench/compare_mnist_loop.sh runs it beside loom's trainer with default flags.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "pyloom"))
from loom_torch import make_model  # noqa: E402


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.path.join(os.path.dirname(__file__), "..", "data", "mnist"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=4)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    images = torch.from_numpy(read_idx(os.path.join(a.data_dir, "train-images-idx3-ubyte")).copy())
    labels = torch.from_numpy(read_idx(os.path.join(a.data_dir, "train-labels-idx1-ubyte")).copy())
    x = ((images.float() / 255.0 - 0.1307) / 0.3081).unsqueeze(1)
    y = labels.long()
    model = make_model("convnet", 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    seconds = 0.0
    for _ in range(a.epochs):
        t0 = time.perf_counter()
        perm = torch.randperm(x.size(0))
        for i in range(0, x.size(0), a.batch):
            idx = perm[i:i + a.batch]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            loss.item()
        seconds += time.perf_counter() - t0
    print("torch mnist_loop epochs=%d batch=%d threads=%d images=%d training_loops_s=%.2f" % (
        a.epochs, a.batch, a.threads, x.size(0), seconds))


if __name__ == "__main__":
    main()
