// CPU batch-norm kernels over a contiguous (N, C, S) input (S = the product
// of the spatial dims), one channel per task: a channel's values are read
// from DRAM once and revisited from cache by the later passes.
#pragma once

#include <cstdint>

#include "tensor/native/BatchNormShape.h"

namespace loom {
namespace cpu {

using native::BatchNormShape;  // tensor/native/BatchNormShape.h

// Training forward: per channel mean and biased variance of x (written to
// mean / var), then y = (x - mean) / sqrt(var + eps) * weight + bias
// (weight/bias may be null: 1 and 0).  invstd receives 1 / sqrt(var + eps).
template <typename T>
void batch_norm_train_forward(const BatchNormShape& s, const T* x, const T* weight, const T* bias,
                              double eps, T* y, T* mean, T* var, T* invstd);

// y = (x - mean) * invstd * weight + bias with given per-channel statistics.
template <typename T>
void batch_norm_apply(const BatchNormShape& s, const T* x, const T* mean, const T* invstd,
                      const T* weight, const T* bias, T* y);

// Backward with the statistics used in the forward.  training: the batch
// statistics depend on x (the full formula); otherwise they are constants.
// Null outputs are skipped; grad_weight/grad_bias are written even if weight is null.
template <typename T>
void batch_norm_backward(const BatchNormShape& s, const T* grad_out, const T* x, const T* mean,
                         const T* invstd, const T* weight, bool training, T* grad_input,
                         T* grad_weight, T* grad_bias);

}  // namespace cpu
}  // namespace loom
