"""Runs one training-mode forward/backward of a model in PyTorch from loom's
saved weights and inputs, and writes logits, loss and every gradient.

usage: parity.py MODEL NUM_CLASSES IN.safetensors OUT.safetensors
IN holds the model's state_dict plus "__input" (N, C, H, W) and "__target" (N).
"""
import sys

import torch

from loom_torch import load_safetensors, make_model, save_safetensors


def main():
    name, num_classes, src, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    torch.set_num_threads(1)
    tensors = load_safetensors(src)
    x, y = tensors.pop("__input"), tensors.pop("__target")
    model = make_model(name, num_classes)
    model.load_state_dict(tensors, strict=True)
    model.train()
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits, y)
    loss.backward()
    out = {"logits": logits, "loss": loss.reshape(())}
    for pname, p in model.named_parameters():
        out["grad." + pname] = p.grad
    for bname, b in model.named_buffers():
        out["buffer." + bname] = b
    save_safetensors(out, dst)


if __name__ == "__main__":
    main()
