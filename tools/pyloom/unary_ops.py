"""PyTorch reference for loom's unary op table (tensor/native/UnaryOps.h),
used by tests/autograd/unary_ops_test.cpp.

  python3 unary_ops.py in.safetensors out.safetensors OP[:ARG[:ARG]] ...

in.safetensors holds x and grad (float64, one shape); for each requested op
the output gets "<spec>.out" = f(x) and "<spec>.grad" = the gradient of
sum(f(x) * grad) with respect to x.  ARGs are the op's parameters in
PyTorch's order (leaky_relu:0.2, elu:0.5, softplus:2:1).  REFERENCE is the
test's reference table: an op added to loom's table gets one line here.
"""
import sys

import torch
import torch.nn.functional as F

from loom_torch import load_safetensors, save_safetensors

REFERENCE = {
    "neg": torch.neg,
    "abs": torch.abs,
    "sign": torch.sign,
    "exp": torch.exp,
    "expm1": torch.expm1,
    "log": torch.log,
    "log1p": torch.log1p,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "erf": torch.erf,
    "relu": F.relu,
    "relu6": F.relu6,
    "leaky_relu": F.leaky_relu,
    "elu": F.elu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "softplus": F.softplus,
    "mish": F.mish,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def main():
    inputs = load_safetensors(sys.argv[1])
    out = {}
    for spec in sys.argv[3:]:
        name, *args = spec.split(":")
        if name not in REFERENCE:
            sys.exit(f"unary_ops.py: no PyTorch reference for '{name}': add it to REFERENCE")
        x = inputs["x"].clone().requires_grad_()
        y = REFERENCE[name](x, *[float(a) for a in args])
        (g,) = torch.autograd.grad(y, x, inputs["grad"])
        out[spec + ".out"] = y.detach()
        out[spec + ".grad"] = g
    save_safetensors(out, sys.argv[2])


if __name__ == "__main__":
    main()
