// Raw (non-differentiable) group normalisation, ATen's native_group_norm and
// native_group_norm_backward: argument checks here, one kernel slot per
// device (tensor/cpu/GroupNorm.cpp, tensor/cuda/GroupNorm.cpp).
//
// The input (N, C, *) is seen as a contiguous (N, C, HxW) block (HxW = the
// product of the dims after C, 1 for (N, C)) whose C channels fall into G
// groups of D = C / G consecutive channels.  Per sample n and group g the
// D * HxW values are normalised together:
//   mean[n, g], rstd[n, g] = 1 / sqrt(var[n, g] + eps)  (biased var)
//   y[n, c, s] = (x[n, c, s] - mean[n, g]) * rstd[n, g] * weight[c] + bias[c]
// with g = c / D and weight, bias (C) optional (1 and 0).
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
// on its device; weight, bias (C) may be undefined (1 and 0).  input, out,
// grad_out, grad_input: (N, C, HxW); mean, rstd: (N, G).  C is a multiple of
// G >= 1.  A backward kernel skips each undefined gradient; grad_weight and
// grad_bias are (C) even when weight is undefined.  N, C and HxW may be 0.
// Queued on the device's current stream.
using GroupNormKernel = void (*)(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                 int64_t N, int64_t C, int64_t HxW, int64_t group, double eps,
                                 const Tensor& out, const Tensor& mean, const Tensor& rstd);
using GroupNormBackwardKernel = void (*)(const Tensor& grad_out, const Tensor& input,
                                         const Tensor& mean, const Tensor& rstd,
                                         const Tensor& weight, int64_t N, int64_t C, int64_t HxW,
                                         int64_t group, const Tensor& grad_input,
                                         const Tensor& grad_weight, const Tensor& grad_bias);
extern DispatchStub<GroupNormKernel> group_norm_stub;
extern DispatchStub<GroupNormBackwardKernel> group_norm_backward_stub;

// ---- ops ----------------------------------------------------------------------

// Returns (output, mean, rstd): output of input's shape, mean and rstd of
// shape (N, num_groups), as ATen's native_group_norm; all contiguous, on the
// input's device and of its dtype.  A group of no values (HxW = 0) has mean 0
// and rstd 1 / sqrt(eps).
// Throws loom::Error when input is undefined, not float32/float64 or has
// fewer than 2 dims, num_groups is not positive or does not divide C =
// input.size(1), weight or bias (each may be undefined) is not a vector of C
// values, or any of them differs from input in dtype or device.
std::tuple<Tensor, Tensor, Tensor> group_norm(const Tensor& input, int64_t num_groups,
                                              const Tensor& weight, const Tensor& bias,
                                              double eps);

// Returns (grad_input, grad_weight, grad_bias) for grad_out (input's shape),
// from the forward's mean and rstd; each only where output_mask says (else
// undefined).  grad_weight and grad_bias have shape (C).
// Throws loom::Error when a shape, dtype or device does not match the
// forward's (grad_out may differ in dtype only: it is converted).
std::tuple<Tensor, Tensor, Tensor> group_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& mean, const Tensor& rstd,
                                                       const Tensor& weight, int64_t num_groups,
                                                       std::array<bool, 3> output_mask);

}  // namespace native
}  // namespace loom
