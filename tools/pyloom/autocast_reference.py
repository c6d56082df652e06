"""The output dtype of ops under torch.autocast("cpu", dtype=torch.bfloat16),
for loom's table-driven autocast test.

  python3 autocast_reference.py
prints "name dtype" per line; tests/autograd/autocast_test.cpp runs the same
named expressions in loom.  Inputs: x (2, 3, 6, 6), w (4, 3, 3, 3), m (3, 3)
float32; m3 (2, 3, 3) float32; b (3, 3) bfloat16; t (3,) int64.
"""
import torch
import torch.nn.functional as F

NAMES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16",
         torch.float16: "float16", torch.int64: "int64", torch.bool: "bool"}


def main():
    x = torch.randn(2, 3, 6, 6)
    w = torch.randn(4, 3, 3, 3)
    m = torch.randn(3, 3)
    m3 = torch.randn(2, 3, 3)
    b = torch.randn(3, 3).to(torch.bfloat16)
    t = torch.tensor([0, 1, 2])
    ops = {
        "conv2d": lambda: F.conv2d(x, w),
        "conv2d_float64": lambda: F.conv2d(x.double(), w.double()),
        "linear": lambda: F.linear(m, m, m[0]),
        "mm": lambda: torch.mm(m, m),
        "bmm": lambda: torch.bmm(m3, m3),
        "matmul": lambda: torch.matmul(m3, m),
        "add_mixed": lambda: m + b,
        "mul_mixed": lambda: m * b,
        "where_mixed": lambda: torch.where(m > 0, m, b),
        "cat_mixed": lambda: torch.cat([m, b]),
        "stack_mixed": lambda: torch.stack([b, m]),
        "cat_bf16": lambda: torch.cat([b, b]),
        "softmax_f32": lambda: torch.softmax(m, 0),
        "softmax_bf16": lambda: torch.softmax(b, 0),
        "log_softmax_bf16": lambda: torch.log_softmax(b, 1),
        "sum_bf16": lambda: b.sum(),
        "mean_bf16": lambda: b.mean(),
        "exp_bf16": lambda: b.exp(),
        "log_bf16": lambda: (b.abs() + 1).log(),
        "pow_bf16": lambda: b.pow(2),
        "relu_bf16": lambda: b.relu(),
        "sigmoid_bf16": lambda: b.sigmoid(),
        "tanh_bf16": lambda: b.tanh(),
        "gelu_bf16": lambda: F.gelu(b),
        "batch_norm_bf16": lambda: F.batch_norm(b.view(1, 3, 3), None, None, training=True),
        "layer_norm_bf16": lambda: F.layer_norm(b, (3,)),
        "group_norm_bf16": lambda: F.group_norm(b.view(1, 3, 3), 1),
        "max_pool2d_bf16": lambda: F.max_pool2d(b.view(1, 1, 3, 3), 2),
        "avg_pool2d_bf16": lambda: F.avg_pool2d(b.view(1, 1, 3, 3), 2),
        "adaptive_avg_pool2d_bf16": lambda: F.adaptive_avg_pool2d(b.view(1, 1, 3, 3), 1),
        "dropout_bf16": lambda: F.dropout(b, 0.5, True),
        "mse_loss_bf16": lambda: F.mse_loss(b, b),
        "nll_loss_bf16": lambda: F.nll_loss(b, t),
        "cross_entropy_bf16": lambda: F.cross_entropy(b, t),
        "cross_entropy_f32": lambda: F.cross_entropy(m, t),
    }
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for name, fn in ops.items():
            print(name, NAMES[fn().dtype])


if __name__ == "__main__":
    main()
