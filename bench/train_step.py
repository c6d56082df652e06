"""PyTorch twin of bench/train_step.cpp: same model, batch, data shape,
loss and optimizer; prints the same line with "torch" in front."""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "pyloom"))
from loom_torch import make_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="convnet")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = make_model(a.model, 10)
    channels = 1 if a.model == "convnet" else 3
    x = torch.randn(a.batch, channels, a.size, a.size)
    y = torch.randint(0, 10, (a.batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    ms = []
    for i in range(a.warmup + a.iters):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        t1 = time.perf_counter()
        if i >= a.warmup:
            ms.append((t1 - t0) * 1000)
    print("torch %s batch=%d size=%d threads=%d ms_per_step=%.2f mean=%.2f" % (
        a.model, a.batch, a.size, a.threads, statistics.median(ms), statistics.mean(ms)))


if __name__ == "__main__":
    main()
