// Differentiable normalisation layers: batch norm over dim 1 of (N, C, ...)
// inputs (autograd/functions/Normalization.cpp), layer norm over trailing
// dims (LayerNorm.cpp) and group norm over channel groups (GroupNorm.cpp).
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

// relu(batch_norm(...)) in one pass over the activations where the device's
// kernels fuse it (the CPU's), with the same values and gradients: ResNet's
// "bn, then ReLU".
Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training,
                       double momentum = 0.1, double eps = 1e-5);

// relu(batch_norm(input, ...) + residual), the add and the ReLU in batch
// norm's output pass where the device's kernels fuse them (the CPU's, for a
// residual of input's dtype), with the same gradients: ResNet's block ending
// "bn3, add the identity, ReLU".  residual must have input's shape.
Tensor batch_norm_add_relu(const Tensor& input, const Tensor& residual,
                           const Tensor& running_mean, const Tensor& running_var,
                           const Tensor& weight, const Tensor& bias, bool training,
                           double momentum = 0.1, double eps = 1e-5);

// torch.nn.functional.layer_norm: normalises input (..., *normalized_shape)
// over its trailing normalized_shape.size() dims, each slice to mean 0 and
// biased variance 1 (+ eps), then y = x_hat * weight + bias with weight and
// bias of shape normalized_shape (each may be undefined: 1 and 0).
// Differentiable in input, weight and bias, to any order: the first backward
// runs the fused kernel (native::layer_norm_backward); under create_graph it
// is built from differentiable ops instead, so it can be differentiated again.
// Throws loom::Error on a normalized_shape that is empty or not input's
// trailing dims, weight/bias of another shape, or a dtype/device mismatch.
Tensor layer_norm(const Tensor& input, const IntList& normalized_shape,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);

// torch.nn.functional.group_norm: input (N, C, *) with its C channels split
// into num_groups groups of C / num_groups consecutive channels; each
// sample's group is normalised to mean 0 and biased variance 1 (+ eps), then
// y = x_hat * weight[c] + bias[c] with weight, bias (C) (each may be
// undefined: 1 and 0).  Differentiable in input, weight and bias, to any
// order (as layer_norm).  Throws loom::Error when input has fewer than 2 dims,
// num_groups does not divide C, weight/bias are not (C), or on a dtype/device
// mismatch.
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace loom
