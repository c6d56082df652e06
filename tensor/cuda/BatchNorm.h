// CUDA batch-norm launchers on raw pointers, for tensor/cuda/BatchNorm.cpp.
// Plain C++ declarations; kernels in BatchNorm.cu.
//
// Same contract as the CPU kernels (tensor/cpu/Normalization.h): contiguous
// (N, C, S) input of float32 or float64, per-channel (C) statistics and
// parameters of its dtype (weight/bias may be null: 1 and 0); or input (and
// output, gradients) of float16 or bfloat16 with float32 statistics and
// parameters.  `scratch` is device memory
// of batch_norm_scratch_doubles doubles (per-channel coefficients and the
// partial sums of the channel's tiles, BatchNormPlan.h).  Queued on `stream`
// of `device`; returns without waiting.
#pragma once

#include <cstdint>

#include "tensor/DType.h"
#include "tensor/native/BatchNormShape.h"

namespace loom {
namespace cuda {

// The doubles of scratch the forward (backward false) or backward of shape s
// needs on `device` (its tiling depends on the device's SM count).
int64_t batch_norm_scratch_doubles(const native::BatchNormShape& s, bool backward, int device);

// training: batch mean and biased variance per channel -> save_mean,
// save_invstd = 1 / sqrt(var + eps); when running_mean/var are non-null they
// become (1 - momentum) * running + momentum * batch (variance unbiased by
// count / (count - 1)).  Otherwise the running statistics (required) are used
// and saved.  Then y = (x - mean) * invstd * weight + bias, plus residual
// (laid out as x, of its dtype) with s.residual, and max(that, 0) with s.relu.
void batch_norm_forward(DType dtype, const native::BatchNormShape& s, const void* x,
                        const void* residual, const void* weight, const void* bias,
                        void* running_mean,
                        void* running_var, bool training, double momentum, double eps, void* y,
                        void* save_mean, void* save_invstd, double* scratch, int device,
                        uint64_t stream);

// Gradients with the statistics of the forward; null outputs are skipped.
// With s.relu, grad_out goes through the mask of the fused forward's output
// relu_out (laid out as x): dy where relu_out > 0, else 0.
void batch_norm_backward(DType dtype, const native::BatchNormShape& s, const void* grad_out,
                         const void* relu_out, const void* x, const void* mean,
                         const void* invstd, const void* weight,
                         bool training, void* grad_input, void* grad_weight, void* grad_bias,
                         double* scratch, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
