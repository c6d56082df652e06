"""PyTorch side of loom's layer_norm / group_norm parity test: forward and
backward of torch.nn.functional.layer_norm / group_norm, or of the
torch.nn.LayerNorm / GroupNorm module loaded (strictly) from loom's
state_dict, on loom's inputs.

usage: norm_parity.py SPEC.json IN.safetensors OUT.safetensors
SPEC maps a case name to {"op": "layer_norm" | "group_norm",
"normalized_shape": [...] | "num_groups": G, "eps": e, "module": bool}.
IN holds per case "<case>.x", "<case>.dy" and, when given, "<case>.weight",
"<case>.bias".  OUT gets "<case>.out", "<case>.dx", "<case>.dweight",
"<case>.dbias" (the last two when the case has them).
"""
import json
import sys

import torch
import torch.nn.functional as F

from loom_torch import load_safetensors, save_safetensors


def run_case(name, spec, tensors):
    x = tensors[name + ".x"].clone().requires_grad_()
    dy = tensors[name + ".dy"]
    weight = tensors.get(name + ".weight")
    bias = tensors.get(name + ".bias")
    op, eps = spec["op"], spec["eps"]
    if spec.get("module"):
        affine = weight is not None
        if op == "layer_norm":
            m = torch.nn.LayerNorm(spec["normalized_shape"], eps=eps, elementwise_affine=affine)
        else:
            m = torch.nn.GroupNorm(spec["num_groups"], x.shape[1], eps=eps, affine=affine)
        m = m.to(x.dtype)
        if affine:
            m.load_state_dict({"weight": weight, "bias": bias}, strict=True)
        params = {"weight": m.weight, "bias": m.bias} if affine else {}
        out = m(x)
    else:
        params = {}
        if weight is not None:
            weight = weight.clone().requires_grad_()
            params["weight"] = weight
        if bias is not None:
            bias = bias.clone().requires_grad_()
            params["bias"] = bias
        if op == "layer_norm":
            out = F.layer_norm(x, spec["normalized_shape"], weight, bias, eps)
        else:
            if weight is None and bias is not None:
                # torch 1.13's group_norm backward fails ("tensor does not
                # have a device") with a bias and no weight; a weight of ones
                # that needs no gradient is the same function.
                weight = torch.ones(x.shape[1], dtype=x.dtype)
            out = F.group_norm(x, spec["num_groups"], weight, bias, eps)
    out.backward(dy)
    result = {name + ".out": out, name + ".dx": x.grad}
    for pname, p in params.items():
        result[name + ".d" + pname] = p.grad
    return result


def main():
    spec_path, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
    torch.set_num_threads(1)
    with open(spec_path) as f:
        specs = json.load(f)
    tensors = load_safetensors(src)
    out = {}
    for name, spec in specs.items():
        out.update(run_case(name, spec, tensors))
    save_safetensors(out, dst)


if __name__ == "__main__":
    main()
