// Raw (non-differentiable) layer normalisation, ATen's native_layer_norm and
// native_layer_norm_backward: argument checks here, one kernel slot per
// device (tensor/cpu/LayerNorm.cpp, tensor/cuda/LayerNorm.cpp).
//
// The input (..., *normalized_shape) is seen as a contiguous (M, N) matrix:
// N = the product of normalized_shape (the trailing dims normalised
// together), M = the product of the leading dims.  Per row i:
//   mean[i] = sum_j x[i, j] / N,   rstd[i] = 1 / sqrt(var[i] + eps)  (biased var)
//   y[i, j] = (x[i, j] - mean[i]) * rstd[i] * weight[j] + bias[j]
// with weight and bias (normalized_shape) optional (1 and 0).
#pragma once

#include <array>
#include <cstdint>
#include <tuple>

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// ---- kernels: one signature each, a slot per device ----------------------------
//
// Every tensor is contiguous, of the input's dtype (float32 or float64) and
// on its device; weight, bias (N) may be undefined (1 and 0).  input, out,
// grad_out, grad_input: (M, N) elements; mean, rstd: M.  A backward kernel
// skips each undefined gradient; grad_weight and grad_bias are (N) even when
// weight is undefined.  M and N may be 0.  Queued on the device's current
// stream.
using LayerNormKernel = void (*)(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                 int64_t M, int64_t N, double eps, const Tensor& out,
                                 const Tensor& mean, const Tensor& rstd);
using LayerNormBackwardKernel = void (*)(const Tensor& grad_out, const Tensor& input,
                                         const Tensor& mean, const Tensor& rstd,
                                         const Tensor& weight, int64_t M, int64_t N,
                                         const Tensor& grad_input, const Tensor& grad_weight,
                                         const Tensor& grad_bias);
extern DispatchStub<LayerNormKernel> layer_norm_stub;
extern DispatchStub<LayerNormBackwardKernel> layer_norm_backward_stub;

// ---- ops ----------------------------------------------------------------------

// Returns (output, mean, rstd): output of input's shape, mean and rstd of
// shape input.sizes()[:axis] + [1] * normalized_shape.size() (axis = the
// first normalised dim), as ATen's native_layer_norm.  All contiguous, on the
// input's device and of its dtype.  A row of N = 0 values has mean 0 and rstd
// 1 / sqrt(eps).
// Throws loom::Error when input is undefined or not float32/float64,
// normalized_shape is empty or is not input's trailing dims, weight or bias
// (each may be undefined) does not have shape normalized_shape, or any of them
// differs from input in dtype or device.
std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& input, const IntList& normalized_shape,
                                              const Tensor& weight, const Tensor& bias,
                                              double eps);

// Returns (grad_input, grad_weight, grad_bias) for grad_out (input's shape),
// from the forward's mean and rstd; each only where output_mask says (else
// undefined).  grad_weight and grad_bias have shape normalized_shape.
// Throws loom::Error when a shape, dtype or device does not match the
// forward's (grad_out may differ in dtype only: it is converted).
std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const IntList& normalized_shape,
                                                       const Tensor& mean, const Tensor& rstd,
                                                       const Tensor& weight,
                                                       std::array<bool, 3> output_mask);

}  // namespace native
}  // namespace loom
