// Batch-norm kernels.  Everything is per channel: statistics are sums over
// the N contiguous runs of S values of that channel (double accumulators for
// float32, vectorised with omp simd), and every output is an affine map
// y = a * x + b (or a * dy + b * x + c in the backward) with per-channel
// coefficients, so each pass is one fused streaming loop.
#include "tensor/cpu/Normalization.h"

#include <cmath>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Normalization.h"

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

// ---- the dispatch slots (native/Normalization.h) ----------------------------------

namespace {

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

void batch_norm_kernel(const BatchNormShape& s, const Tensor& x, const Tensor& weight,
                       const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                       bool training, double momentum, double eps, const Tensor& out,
                       const Tensor& save_mean, const Tensor& save_invstd) {
  const int64_t count = s.batch * s.spatial;
  dispatch_floating(x.dtype(), "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* mean = static_cast<T*>(save_mean.data_ptr());
    T* invstd = static_cast<T*>(save_invstd.data_ptr());
    if (training) {
      std::vector<T> var(s.channels);
      batch_norm_train_forward<T>(s, cptr<T>(x), cptr<T>(weight), cptr<T>(bias), eps,
                                  static_cast<T*>(out.data_ptr()), mean, var.data(), invstd);
      if (running_mean.defined()) {
        // running = (1 - momentum) * running + momentum * batch (variance unbiased).
        Tensor rm = native::contiguous(running_mean), rv = native::contiguous(running_var);
        T* pm = static_cast<T*>(rm.data_ptr());
        T* pv = static_cast<T*>(rv.data_ptr());
        const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
        for (int64_t c = 0; c < s.channels; ++c) {
          pm[c] = static_cast<T>((1 - momentum) * pm[c] + momentum * mean[c]);
          pv[c] = static_cast<T>((1 - momentum) * pv[c] + momentum * var[c] * unbias);
        }
        if (!rm.is_same(running_mean)) native::copy_(running_mean, rm);
        if (!rv.is_same(running_var)) native::copy_(running_var, rv);
        running_mean.bump_version();
        running_var.bump_version();
      }
    } else {
      const Tensor rm = native::contiguous(running_mean), rv = native::contiguous(running_var);
      const T* pm = cptr<T>(rm);
      const T* pv = cptr<T>(rv);
      for (int64_t c = 0; c < s.channels; ++c) {
        mean[c] = pm[c];
        invstd[c] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(pv[c]) + eps));
      }
      batch_norm_apply<T>(s, cptr<T>(x), mean, invstd, cptr<T>(weight), cptr<T>(bias),
                          static_cast<T*>(out.data_ptr()));
    }
  });
}

void batch_norm_backward_kernel(const BatchNormShape& s, const Tensor& grad_output,
                                const Tensor& x, const Tensor& weight, const Tensor& save_mean,
                                const Tensor& save_invstd, bool training, const Tensor& grad_input,
                                const Tensor& grad_weight, const Tensor& grad_bias) {
  dispatch_floating(x.dtype(), "batch_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto out = [](const Tensor& t) { return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr; };
    batch_norm_backward<T>(s, cptr<T>(grad_output), cptr<T>(x), cptr<T>(save_mean),
                           cptr<T>(save_invstd), cptr<T>(weight), training, out(grad_input),
                           out(grad_weight), out(grad_bias));
  });
}

}  // namespace

static const native::RegisterKernel reg_batch_norm(native::batch_norm_stub, kCPU,
                                                   &batch_norm_kernel);
static const native::RegisterKernel reg_batch_norm_backward(native::batch_norm_backward_stub,
                                                            kCPU, &batch_norm_backward_kernel);

}  // namespace cpu
}  // namespace loom
