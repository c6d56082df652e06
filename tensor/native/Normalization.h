// Raw (non-differentiable) batch normalisation over dim 1 of (N, C, ...)
// inputs: checks, running-statistics update, kernels in tensor/cpu/Normalization.
#pragma once

#include <tuple>

#include "tensor/Tensor.h"

namespace loom {
namespace native {

// Returns (output, save_mean, save_invstd): the per-channel statistics the
// output was normalised with (batch statistics when training, else the
// running ones), for batch_norm_backward.  When training and running stats
// are given they are updated in place (unbiased variance, momentum) and their
// versions bumped.  weight, bias, running_mean, running_var may be undefined
// (eval needs the running stats).
std::tuple<Tensor, Tensor, Tensor> batch_norm(const Tensor& input, const Tensor& running_mean,
                                              const Tensor& running_var, const Tensor& weight,
                                              const Tensor& bias, bool training, double momentum,
                                              double eps);

// Gradients for grad_output; each only when its flag is set.  grad_weight and
// grad_bias are (C) even when weight is undefined.
void batch_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training,
                         bool need_input, bool need_weight, bool need_bias, Tensor& grad_input,
                         Tensor& grad_weight, Tensor& grad_bias);

}  // namespace native

namespace cuda {
// The CUDA backend of batch_norm / batch_norm_backward
// (tensor/native/CudaNormalization.cpp, kernels in tensor/cuda/BatchNorm.cu),
// same contract and formulas as the CPU's: x, out, grad_output, grad_input
// contiguous (N, C, ...); weight, bias, save_mean, save_invstd contiguous (C)
// or undefined; running_mean/var (C) of any strides, updated in place (and
// their versions bumped) when training.  Undefined gradients are skipped.
void batch_norm_kernel(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, bool training,
                       double momentum, double eps, const Tensor& out, const Tensor& save_mean,
                       const Tensor& save_invstd);
void batch_norm_backward_kernel(const Tensor& grad_output, const Tensor& x, const Tensor& weight,
                                const Tensor& save_mean, const Tensor& save_invstd, bool training,
                                const Tensor& grad_input, const Tensor& grad_weight,
                                const Tensor& grad_bias);
}  // namespace cuda
}  // namespace loom
