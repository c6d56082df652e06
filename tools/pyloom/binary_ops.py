"""PyTorch reference for loom's binary op table (tensor/native/BinaryOps.h),
used by tests/autograd/binary_ops_test.cpp.

  python3 binary_ops.py in.safetensors out.safetensors OP ...

in.safetensors holds a, b (float64; b broadcasts against a) and grad (the
result's shape); for each op the output gets "<op>.out" = a op b and, for
arithmetic ops, "<op>.grad_a" / "<op>.grad_b": the gradients of
sum((a op b) * grad).  REFERENCE is the test's reference table.
"""
import sys

import torch

from loom_torch import load_safetensors, save_safetensors

REFERENCE = {
    "add": (torch.add, True),
    "sub": (torch.sub, True),
    "mul": (torch.mul, True),
    "div": (torch.div, True),
    "pow": (torch.pow, True),
    "maximum": (torch.maximum, True),
    "minimum": (torch.minimum, True),
    "eq": (torch.eq, False),
    "ne": (torch.ne, False),
    "lt": (torch.lt, False),
    "le": (torch.le, False),
    "gt": (torch.gt, False),
    "ge": (torch.ge, False),
}


def main():
    inputs = load_safetensors(sys.argv[1])
    out = {}
    for name in sys.argv[3:]:
        if name not in REFERENCE:
            sys.exit(f"binary_ops.py: no PyTorch reference for '{name}': add it to REFERENCE")
        fn, differentiable = REFERENCE[name]
        a = inputs["a"].clone().requires_grad_(differentiable)
        b = inputs["b"].clone().requires_grad_(differentiable)
        y = fn(a, b)
        out[name + ".out"] = y.detach()
        if differentiable:
            ga, gb = torch.autograd.grad(y, (a, b), inputs["grad"])
            out[name + ".grad_a"] = ga
            out[name + ".grad_b"] = gb
    save_safetensors(out, sys.argv[2])


if __name__ == "__main__":
    main()
