// Raw (non-differentiable) batch normalisation over dim 1 of (N, C, ...)
// inputs: checks, running-statistics update, kernels in tensor/cpu/Normalization.
#pragma once

#include <tuple>

#include "tensor/Tensor.h"
#include "tensor/native/BatchNormShape.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// Returns (output, save_mean, save_invstd): the per-channel statistics the
// output was normalised with (batch statistics when training, else the
// running ones), for batch_norm_backward.  When training and running stats
// are given they are updated in place (unbiased variance, momentum) and their
// versions bumped.  weight, bias, running_mean, running_var may be undefined
// (eval needs the running stats).  A defined residual (input's shape) is
// added to the output, and with relu the output is then max(output, 0)
// (both in the pass that writes it where the device's kernels fuse them,
// else as separate ops after: the residual's dtype may differ then, and the
// sum is promoted as `+` promotes).
std::tuple<Tensor, Tensor, Tensor> batch_norm(const Tensor& input, const Tensor& running_mean,
                                              const Tensor& running_var, const Tensor& weight,
                                              const Tensor& bias, bool training, double momentum,
                                              double eps, bool relu = false,
                                              const Tensor& residual = Tensor());

// The dtype of batch norm's statistics and parameters beside an input of
// `input` dtype: its own, float32 for 16-bit activations (which a device's
// kernels may take as they are).
DType batch_norm_stats_dtype(DType input);

// Gradients for grad_output; each only when its flag is set.  grad_weight and
// grad_bias are (C) even when weight is undefined.  relu_output: for
// batch_norm(..., relu = true), its output; grad_output then goes through the
// ReLU's mask first (kept where relu_output > 0, else 0), in the kernels'
// passes where the device fuses the ReLU, else as a separate step.
void batch_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training,
                         bool need_input, bool need_weight, bool need_bias, Tensor& grad_input,
                         Tensor& grad_weight, Tensor& grad_bias,
                         const Tensor& relu_output = Tensor());

// ---- kernels (one slot per device type) -----------------------------------------
// x contiguous (N, C, S) as `s` says, per-channel (C) tensors contiguous
// (weight/bias may be undefined: 1 and 0).  training: batch mean and biased
// variance per channel -> save_mean, save_invstd = 1 / sqrt(var + eps); when
// running_mean/var are defined they become (1 - momentum) * running +
// momentum * batch (variance unbiased by count / (count - 1)) and their
// versions are bumped.  Otherwise the running statistics (required) are used
// and saved.  Then out = (x - mean) * invstd * weight + bias, plus residual
// (x's dtype and layout) with s.residual, and with s.relu max(that, 0).
using BatchNormKernel = void (*)(const BatchNormShape& s, const Tensor& x,
                                 const Tensor& residual, const Tensor& weight,
                                 const Tensor& bias, const Tensor& running_mean,
                                 const Tensor& running_var, bool training, double momentum,
                                 double eps, const Tensor& out, const Tensor& save_mean,
                                 const Tensor& save_invstd);
// Gradients with the statistics of the forward; undefined outputs are not
// wanted (grad_weight/grad_bias are computed even when weight is undefined).
// With s.relu, grad_output is first masked by the fused forward's output y
// (laid out as x): dy where y > 0, else 0.  y is undefined otherwise.
using BatchNormBackwardKernel = void (*)(const BatchNormShape& s, const Tensor& grad_output,
                                         const Tensor& y, const Tensor& x, const Tensor& weight,
                                         const Tensor& save_mean, const Tensor& save_invstd,
                                         bool training, const Tensor& grad_input,
                                         const Tensor& grad_weight, const Tensor& grad_bias);

// Whether the device's kernels take a 16-bit float input (float32
// statistics and parameters beside it) as it is; else the native ops compute
// in float32 and round once.
using BatchNormTakesKernel = bool (*)(DType dtype);
// Whether the kernels apply s.relu and s.residual for inputs of dtype: the
// forward the residual add and a ReLU on the output in the pass that writes
// it, the backward the ReLU's mask on the output gradient in the passes that
// read it; else the native ops apply them around the kernels.
using BatchNormFusesReluKernel = bool (*)(DType dtype);
// Whether the kernels take a 4-D channels-last input of dtype as it is
// (BatchNormShape::channels_last); else the native ops give them an NCHW
// copy.  The output and input gradient keep the input's layout either way.
using BatchNormChannelsLastKernel = bool (*)(DType dtype);

extern DispatchStub<BatchNormKernel> batch_norm_stub;
extern DispatchStub<BatchNormTakesKernel> batch_norm_takes_stub;
extern DispatchStub<BatchNormChannelsLastKernel> batch_norm_channels_last_stub;
extern DispatchStub<BatchNormFusesReluKernel> batch_norm_fuses_relu_stub;
extern DispatchStub<BatchNormBackwardKernel> batch_norm_backward_stub;

}  // namespace native
}  // namespace loom
