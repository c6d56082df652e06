// Batch normalisation over dim 1 of (N, C, ...) inputs.
#pragma once

#include "tensor/Tensor.h"

namespace loom {

// training: normalises with the batch statistics and, when running_mean /
// running_var are given, updates them in place (running = (1 - momentum) *
// running + momentum * batch, the variance unbiased).  Not training:
// normalises with the running statistics.  weight/bias (C) optional.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);

}  // namespace loom
