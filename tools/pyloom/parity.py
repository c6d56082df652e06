"""Runs one training-mode forward/backward of a model in PyTorch from loom's
saved weights and inputs, and writes logits, loss and every gradient.

usage: parity.py MODEL NUM_CLASSES IN.safetensors OUT.safetensors [bf16]
With bf16 the forward and the loss run under torch.autocast("cpu",
dtype=torch.bfloat16) (the backward outside it, as usual), and the float32
step from the same weights is written too, as f32.logits, f32.loss and
f32.grad.<name>.
IN holds the model's state_dict plus "__input" (N, C, H, W) and "__target" (N).
"""
import contextlib
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
    autocast = len(sys.argv) > 5 and sys.argv[5] == "bf16"
    out = {}
    if autocast:
        # The exact (float32) step first, from the same weights, as "f32.*":
        # the yardstick both autocast results are measured against.
        pristine = {k: v.clone() for k, v in model.state_dict().items()}
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        loss.backward()
        out["f32.logits"], out["f32.loss"] = logits, loss.reshape(())
        for pname, p in model.named_parameters():
            out["f32.grad." + pname] = p.grad.clone()
        model.load_state_dict(pristine)
        model.zero_grad()
    region = (torch.autocast("cpu", dtype=torch.bfloat16) if autocast
              else contextlib.nullcontext())
    with region:
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
    loss.backward()
    out.update({"logits": logits, "loss": loss.reshape(())})
    for pname, p in model.named_parameters():
        out["grad." + pname] = p.grad
    for bname, b in model.named_buffers():
        out["buffer." + bname] = b
    save_safetensors(out, dst)


if __name__ == "__main__":
    main()
