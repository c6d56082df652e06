"""Forward multiply-adds of one batch of a zoo model (tools/pyloom/loom_torch.py,
the PyTorch twins of loom's models): every Conv2d counts
out.numel() * in_channels / groups * kh * kw, every Linear
batch * in_features * out_features; batch norm, ReLU, pooling and the loss
are not counted.  A training step is taken as 3x the forward multiply-adds
(forward, input gradient, weight gradient), 2 FLOPs each:
  train_step_flops = 3 * forward_macs * 2
Prints: macs model=<m> batch=<B> size=<S> forward_macs=<n> train_step_gflop=<g>
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "pyloom"))
from loom_torch import make_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=10)
    a = ap.parse_args()
    model = make_model(a.model, a.classes)
    macs = [0]

    def conv_hook(m, inp, out):
        kh, kw = m.kernel_size
        macs[0] += out.numel() * (m.in_channels // m.groups) * kh * kw

    def linear_hook(m, inp, out):
        macs[0] += out.numel() * m.in_features

    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            m.register_forward_hook(conv_hook)
        elif isinstance(m, torch.nn.Linear):
            m.register_forward_hook(linear_hook)
    channels = 1 if a.model == "convnet" else 3
    with torch.no_grad():
        model(torch.zeros(a.batch, channels, a.size, a.size))
    print("macs model=%s batch=%d size=%d forward_macs=%d train_step_gflop=%.2f" % (
        a.model, a.batch, a.size, macs[0], 3 * macs[0] * 2 / 1e9))


if __name__ == "__main__":
    main()
