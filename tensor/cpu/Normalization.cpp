// Batch-norm kernels.  Everything is per channel: statistics are sums over
// the N contiguous runs of S values of that channel (double accumulators for
// float32, vectorised with omp simd), and every output is an affine map
// y = a * x + b (or a * dy + b * x + c in the backward) with per-channel
// coefficients, so each pass is one fused streaming loop.
#include "tensor/cpu/Normalization.h"

#include <cmath>

#include "tensor/Parallel.h"

namespace loom {
namespace cpu {
namespace {

template <typename Fn>
void for_channels(const BatchNormShape& s, const Fn& fn) {
  const int64_t per_channel = std::max<int64_t>(1, s.batch * s.spatial);
  parallel_for(0, s.channels, std::max<int64_t>(1, 16384 / per_channel), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) fn(c);
  });
}

template <typename T>
double run_sum(const T* x, int64_t n) {
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += x[i];
  return static_cast<double>(acc);
}

template <typename T>
double run_sq_dev(const T* x, int64_t n, T mean) {
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) {
    const T d = x[i] - mean;
    acc += d * d;
  }
  return static_cast<double>(acc);
}

template <typename T>
double run_dot_dev(const T* dy, const T* x, int64_t n, T mean) {
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += dy[i] * (x[i] - mean);
  return static_cast<double>(acc);
}

template <typename T>
void run_affine(const T* x, int64_t n, T a, T b, T* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a + b;
}

}  // namespace

template <typename T>
void batch_norm_train_forward(const BatchNormShape& s, const T* x, const T* weight, const T* bias,
                              double eps, T* y, T* mean, T* var, T* invstd) {
  const int64_t C = s.channels, S = s.spatial;
  const double count = static_cast<double>(s.batch * S);
  for_channels(s, [&](int64_t c) {
    double sum = 0;
    for (int64_t n = 0; n < s.batch; ++n) sum += run_sum(x + (n * C + c) * S, S);
    const T m = static_cast<T>(sum / count);
    double sq = 0;
    for (int64_t n = 0; n < s.batch; ++n) sq += run_sq_dev(x + (n * C + c) * S, S, m);
    const double v = sq / count;
    const double is = 1.0 / std::sqrt(v + eps);
    mean[c] = m;
    var[c] = static_cast<T>(v);
    invstd[c] = static_cast<T>(is);
    const double w = weight ? static_cast<double>(weight[c]) : 1.0;
    const double b = bias ? static_cast<double>(bias[c]) : 0.0;
    const T a = static_cast<T>(w * is), shift = static_cast<T>(b - static_cast<double>(m) * w * is);
    for (int64_t n = 0; n < s.batch; ++n)
      run_affine(x + (n * C + c) * S, S, a, shift, y + (n * C + c) * S);
  });
}

template <typename T>
void batch_norm_apply(const BatchNormShape& s, const T* x, const T* mean, const T* invstd,
                      const T* weight, const T* bias, T* y) {
  const int64_t C = s.channels, S = s.spatial;
  for_channels(s, [&](int64_t c) {
    const double w = weight ? static_cast<double>(weight[c]) : 1.0;
    const double b = bias ? static_cast<double>(bias[c]) : 0.0;
    const double is = static_cast<double>(invstd[c]);
    const T a = static_cast<T>(w * is);
    const T shift = static_cast<T>(b - static_cast<double>(mean[c]) * w * is);
    for (int64_t n = 0; n < s.batch; ++n)
      run_affine(x + (n * C + c) * S, S, a, shift, y + (n * C + c) * S);
  });
}

template <typename T>
void batch_norm_backward(const BatchNormShape& s, const T* grad_out, const T* x, const T* mean,
                         const T* invstd, const T* weight, bool training, T* grad_input,
                         T* grad_weight, T* grad_bias) {
  const int64_t C = s.channels, S = s.spatial;
  const double count = static_cast<double>(s.batch * S);
  for_channels(s, [&](int64_t c) {
    const T m = mean[c];
    double sum_dy = 0, sum_dy_xmu = 0;
    for (int64_t n = 0; n < s.batch; ++n) {
      const int64_t off = (n * C + c) * S;
      sum_dy += run_sum(grad_out + off, S);
      sum_dy_xmu += run_dot_dev(grad_out + off, x + off, S, m);
    }
    const double is = static_cast<double>(invstd[c]);
    if (grad_weight) grad_weight[c] = static_cast<T>(sum_dy_xmu * is);
    if (grad_bias) grad_bias[c] = static_cast<T>(sum_dy);
    if (!grad_input) return;
    const double w = weight ? static_cast<double>(weight[c]) : 1.0;
    // dx = a * dy + b * x + k
    const double a = w * is;
    double b = 0, k = 0;
    if (training) {
      b = -w * is * is * is * (sum_dy_xmu / count);
      k = -w * is * (sum_dy / count) - b * static_cast<double>(m);
    }
    const T ta = static_cast<T>(a), tb = static_cast<T>(b), tk = static_cast<T>(k);
    for (int64_t n = 0; n < s.batch; ++n) {
      const int64_t off = (n * C + c) * S;
      const T* dy = grad_out + off;
      const T* xx = x + off;
      T* dx = grad_input + off;
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) dx[i] = ta * dy[i] + tb * xx[i] + tk;
    }
  });
}

template void batch_norm_train_forward<float>(const BatchNormShape&, const float*, const float*,
                                              const float*, double, float*, float*, float*,
                                              float*);
template void batch_norm_train_forward<double>(const BatchNormShape&, const double*,
                                               const double*, const double*, double, double*,
                                               double*, double*, double*);
template void batch_norm_apply<float>(const BatchNormShape&, const float*, const float*,
                                      const float*, const float*, const float*, float*);
template void batch_norm_apply<double>(const BatchNormShape&, const double*, const double*,
                                       const double*, const double*, const double*, double*);
template void batch_norm_backward<float>(const BatchNormShape&, const float*, const float*,
                                         const float*, const float*, const float*, bool, float*,
                                         float*, float*);
template void batch_norm_backward<double>(const BatchNormShape&, const double*, const double*,
                                          const double*, const double*, const double*, bool,
                                          double*, double*, double*);

}  // namespace cpu
}  // namespace loom
