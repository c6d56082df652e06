// CPU batch-norm kernels over a contiguous (N, C, S) input (S = the product
// of the spatial dims), one channel per task: a channel's values are read
// from DRAM once and revisited from cache by the later passes.  A
// channels-last input (BatchNormShape::channels_last) goes to the row-wise
// kernels at the end.
#pragma once

#include <cstdint>

#include "tensor/Half.h"
#include "tensor/native/BatchNormShape.h"

namespace loom {
namespace cpu {

using native::BatchNormShape;  // tensor/native/BatchNormShape.h

// Training forward: per channel mean and biased variance of x (written to
// mean / var), then y = (x - mean) / sqrt(var + eps) * weight + bias
// (weight/bias may be null: 1 and 0), plus r (a residual laid out as x)
// with s.residual, then max(y, 0) with s.relu.  invstd
// receives 1 / sqrt(var + eps).
// T: the activations' type (x, y, grad_out, grad_input); A: the statistics'
// and parameters' (mean, var, invstd, weight, bias and their gradients), and
// the type the arithmetic runs in.  A = T for float32 and float64;
// T = BFloat16 computes in A = float, each value converted in registers: the
// same numbers as converting the tensors to float32 first and rounding the
// result to bfloat16, without the two full-size copies.
template <typename T, typename A = T>
void batch_norm_train_forward(const BatchNormShape& s, const T* x, const T* r, const A* weight,
                              const A* bias, double eps, T* y, A* mean, A* var, A* invstd);

template <typename T, typename A = T>
void batch_norm_apply(const BatchNormShape& s, const T* x, const T* r, const A* mean,
                      const A* invstd, const A* weight, const A* bias, T* y);

// With s.relu, y is the fused forward's output: grad_out is read through
// the ReLU's mask (grad_out where y > 0, else 0).  y is ignored otherwise.
template <typename T, typename A = T>
void batch_norm_backward(const BatchNormShape& s, const T* grad_out, const T* y, const T* x,
                         const A* mean, const A* invstd, const A* weight, bool training,
                         T* grad_input, A* grad_weight, A* grad_bias);

// The same passes over a channels-last input (s.channels_last: batch *
// spatial rows of C values; NormalizationChannelsLast.cpp).  The functions
// above hand such inputs to these.
template <typename T, typename A = T>
void batch_norm_train_forward_channels_last(const BatchNormShape& s, const T* x, const T* r,
                                            const A* weight, const A* bias, double eps, T* y,
                                            A* mean, A* var, A* invstd);
template <typename T, typename A = T>
void batch_norm_apply_channels_last(const BatchNormShape& s, const T* x, const T* r,
                                    const A* mean, const A* invstd, const A* weight,
                                    const A* bias, T* y);
template <typename T, typename A = T>
void batch_norm_backward_channels_last(const BatchNormShape& s, const T* grad_out, const T* y,
                                       const T* x, const A* mean, const A* invstd,
                                       const A* weight, bool training, T* grad_input,
                                       A* grad_weight, A* grad_bias);

}  // namespace cpu
}  // namespace loom
