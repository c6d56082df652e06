// Matrix products (Eigen on CPU).  Mismatched inner dims throw naming both shapes.
#pragma once

#include "tensor/Tensor.h"

namespace loom {

// (n, k) @ (k, m) -> (n, m).
Tensor mm(const Tensor& self, const Tensor& other);
// (b, n, k) @ (b, k, m) -> (b, n, m).
Tensor bmm(const Tensor& self, const Tensor& other);
// NumPy matmul: 1-D vectors, 2-D matrices, and batched with broadcast batch dims.
Tensor matmul(const Tensor& self, const Tensor& other);
// input @ weight^T + bias: input (..., in), weight (out, in), bias (out) optional.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace loom
