// One channel's batch-norm statistics and affine coefficients from its sums,
// the formulas both layouts' CUDA kernels finish with (BatchNorm.cu for NCHW,
// BatchNormChannelsLast.cu for NHWC): they differ in how they walk the
// values and lay out their partial sums, not in this arithmetic, which is
// the CPU kernels' (tensor/cpu/Normalization.cpp), the oracle.
//
// The coefficients are kept in double in `scratch` (rounded to the
// parameter type P where they are applied), per channel c of C:
//   forward   y  = x * a + shift                coef[c], coef[C + c]
//   backward  dx = a * dy + b * (x - mean) + k  coef[c], coef[C + c], coef[2C + c]
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "tensor/DType.h"
#include "tensor/cuda/BatchNormPlan.h"

namespace loom {
namespace cuda {

// The dtype of the parameters and statistics beside activations of T.
template <typename T>
using ParamOf = compute_type_t<T>;

// Training: from s1 = sum (x - shift) and s2 = sum (x - shift)^2 over the
// channel's n values, its mean (rounded to P as the CPU rounds it) and
// 1 / sqrt(biased variance + eps) into save_mean/save_invstd, the running
// statistics updated when running_mean is non-null (the variance unbiased by
// n / (n - 1)), and the forward's coefficients.
template <typename P>
__device__ __forceinline__ void bn_channel_stats(int64_t c, int64_t C, double s1, double s2,
                                                 double shift, double n, const P* weight,
                                                 const P* bias, double eps, P* running_mean,
                                                 P* running_var, double momentum, P* save_mean,
                                                 P* save_invstd, double* coef) {
  const P m = static_cast<P>(shift + s1 / n);  // rounded as on the CPU
  const double v = squared_deviations(s1, s2, n, shift, static_cast<double>(m)) / n;
  const double is = 1.0 / sqrt(v + eps);
  save_mean[c] = m;
  save_invstd[c] = static_cast<P>(is);
  const double w = weight ? static_cast<double>(weight[c]) : 1.0;
  const double b = bias ? static_cast<double>(bias[c]) : 0.0;
  coef[c] = w * is;                                    // a
  coef[C + c] = b - static_cast<double>(m) * w * is;  // shift
  if (running_mean) {
    const P var = static_cast<P>(v);
    const double unbias = n / (n - 1);
    running_mean[c] = static_cast<P>((1 - momentum) * static_cast<double>(running_mean[c]) +
                                     momentum * static_cast<double>(m));
    running_var[c] = static_cast<P>((1 - momentum) * static_cast<double>(running_var[c]) +
                                    momentum * static_cast<double>(var) * unbias);
  }
}

// Evaluation: the running statistics saved (1 / sqrt(running_var + eps)
// rounded to P, which the CPU applies) and the forward's coefficients.
template <typename P>
__device__ __forceinline__ void bn_channel_eval_stats(int64_t c, int64_t C, const P* weight,
                                                      const P* bias, double eps,
                                                      const P* running_mean,
                                                      const P* running_var, P* save_mean,
                                                      P* save_invstd, double* coef) {
  const P m = running_mean[c];
  const P is_t = static_cast<P>(1.0 / sqrt(static_cast<double>(running_var[c]) + eps));
  save_mean[c] = m;
  save_invstd[c] = is_t;
  const double is = static_cast<double>(is_t);
  const double w = weight ? static_cast<double>(weight[c]) : 1.0;
  const double b = bias ? static_cast<double>(bias[c]) : 0.0;
  coef[c] = w * is;
  coef[C + c] = b - static_cast<double>(m) * w * is;
}

// Backward: from sum_dy and sum_dy_xmu = sum dy (x - mean) over the
// channel's `count` values, grad_weight and grad_bias (each when non-null)
// and the coefficients a, b, k of dx (b = k = 0 in evaluation).
template <typename P>
__device__ __forceinline__ void bn_channel_backward(int64_t c, int64_t C, double sum_dy,
                                                    double sum_dy_xmu, double count,
                                                    const P* invstd, const P* weight,
                                                    bool training, P* grad_weight, P* grad_bias,
                                                    double* coef) {
  const double is = static_cast<double>(invstd[c]);
  if (grad_weight) grad_weight[c] = static_cast<P>(sum_dy_xmu * is);
  if (grad_bias) grad_bias[c] = static_cast<P>(sum_dy);
  const double w = weight ? static_cast<double>(weight[c]) : 1.0;
  double b = 0, k = 0;
  if (training) {
    b = -w * is * is * is * (sum_dy_xmu / count);
    k = -w * is * (sum_dy / count);
  }
  coef[c] = w * is;
  coef[C + c] = b;
  coef[2 * C + c] = k;
}

// dy through a fused ReLU's mask (relu set): dy where the fused output y is
// > 0, else 0 (a NaN output masks like a zero, as ReLU's backward); dy itself
// without one.
template <typename T, typename P>
__device__ __forceinline__ P bn_masked_grad(T dy, T y, bool relu) {
  if (relu && !(static_cast<P>(y) > P(0))) return P(0);
  return static_cast<P>(dy);
}

}  // namespace cuda
}  // namespace loom
