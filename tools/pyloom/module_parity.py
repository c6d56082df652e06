"""Runs torch.nn modules on loom's inputs and writes their outputs and input
gradients, for the module parity tests (tests/nn/TorchModuleRef.h).

usage: module_parity.py IN.safetensors OUT.safetensors
IN's "__metadata__" maps each case name to a Python expression building the
module (evaluated with `nn` = torch.nn and the case's `weight` tensor, if any);
its tensors are "<case>.input", and optionally "<case>.target",
"<case>.weight" and "<case>.grad_output" (the gradient fed to backward; a
scalar output without one is backpropagated with 1).
OUT gets "<case>.output" and, for a floating input, "<case>.grad_input".
"""
import json
import struct
import sys

import torch
import torch.nn as nn

from loom_torch import load_safetensors, save_safetensors


def read_metadata(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return header.get("__metadata__", {})


def main():
    src, dst = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    tensors = load_safetensors(src)
    out = {}
    for case, expr in read_metadata(src).items():
        x = tensors[case + ".input"].clone()
        if x.is_floating_point():
            x.requires_grad_()
        module = eval(expr, {"nn": nn, "torch": torch, "weight": tensors.get(case + ".weight")})
        target = tensors.get(case + ".target")
        y = module(x) if target is None else module(x, target)
        out[case + ".output"] = y.detach().clone()
        if x.requires_grad:
            grad = tensors.get(case + ".grad_output")
            y.backward(grad if grad is not None else torch.ones_like(y))
            out[case + ".grad_input"] = x.grad
    save_safetensors(out, dst)


if __name__ == "__main__":
    main()
