// CUDA batch-norm launchers for channels-last (NHWC) inputs, on raw
// pointers, for tensor/cuda/BatchNorm.cpp.  Plain C++ declarations; kernels
// in BatchNormChannelsLast.cu, their grid in BatchNormChannelsLastPlan.h.
//
// The contract of BatchNorm.h's batch_norm_forward / batch_norm_backward
// (the same arguments, statistics and fusions), for a shape with
// s.channels_last: x, residual, y, grad_out, relu_out and grad_input are
// channels-last dense, i.e. (batch, spatial, channels) in memory, an M x C
// row-major matrix of M = batch * spatial rows.  `scratch` is device memory
// of batch_norm_channels_last_scratch_doubles doubles.  Queued on `stream`
// of `device`; returns without waiting.
#pragma once

#include <cstdint>

#include "tensor/DType.h"
#include "tensor/native/BatchNormShape.h"

namespace loom {
namespace cuda {

// The doubles of scratch the forward (backward false) or backward of shape s
// needs on `device`: the per-channel coefficients, then the row splits'
// partial sums (its grid depends on the device's SM count).
int64_t batch_norm_channels_last_scratch_doubles(const native::BatchNormShape& s, bool backward,
                                                 int device);

void batch_norm_channels_last_forward(DType dtype, const native::BatchNormShape& s,
                                      const void* x, const void* residual, const void* weight,
                                      const void* bias, void* running_mean, void* running_var,
                                      bool training, double momentum, double eps, void* y,
                                      void* save_mean, void* save_invstd, double* scratch,
                                      int device, uint64_t stream);

void batch_norm_channels_last_backward(DType dtype, const native::BatchNormShape& s,
                                       const void* grad_out, const void* relu_out, const void* x,
                                       const void* mean, const void* invstd, const void* weight,
                                       bool training, void* grad_input, void* grad_weight,
                                       void* grad_bias, double* scratch, int device,
                                       uint64_t stream);

}  // namespace cuda
}  // namespace loom
