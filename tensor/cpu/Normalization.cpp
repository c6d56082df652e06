// Batch-norm kernels.  Everything is per channel: statistics are sums over
// the N contiguous runs of S values of that channel (float32 sums of 1,024
// values at a time, vectorised with omp simd, added in double), and every
// output is an affine map y = a * x + b (or a * dy + b * (x - mean) + k in the backward) with
// per-channel coefficients, so each pass is one fused streaming loop.
#include "tensor/cpu/Normalization.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/cpu/Bfloat16Runs.h"
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

// Run loops over n values of storage type T, computing in A (A = T, or float
// for BFloat16: each value widened in registers).
//
// The sums add kSumChunk values at a time in A (vectorised) and the chunks
// in double: a float32 accumulator over a whole run loses digits (over
// 100,000 values near 100 the mean came out 7 ulps off; the CUDA kernels'
// double sums showed it), and PyTorch's CPU batch norm accumulates float32
// in double.
constexpr int64_t kSumChunk = 1024;

template <typename A, typename T>
double run_sum(const T* x, int64_t n) {
  double total = 0;
  for (int64_t i0 = 0; i0 < n; i0 += kSumChunk) {
    const int64_t i1 = std::min(n, i0 + kSumChunk);
    A acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = i0; i < i1; ++i) acc += static_cast<A>(x[i]);
    total += static_cast<double>(acc);
  }
  return total;
}

template <typename A, typename T>
double run_sq_dev(const T* x, int64_t n, A mean) {
  double total = 0;
  for (int64_t i0 = 0; i0 < n; i0 += kSumChunk) {
    const int64_t i1 = std::min(n, i0 + kSumChunk);
    A acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = i0; i < i1; ++i) {
      const A d = static_cast<A>(x[i]) - mean;
      acc += d * d;
    }
    total += static_cast<double>(acc);
  }
  return total;
}

template <typename A, typename T>
double run_dot_dev(const T* dy, const T* x, int64_t n, A mean) {
  double total = 0;
  for (int64_t i0 = 0; i0 < n; i0 += kSumChunk) {
    const int64_t i1 = std::min(n, i0 + kSumChunk);
    A acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = i0; i < i1; ++i) acc += static_cast<A>(dy[i]) * (static_cast<A>(x[i]) - mean);
    total += static_cast<double>(acc);
  }
  return total;
}

// The backward's two sums over a run, in one pass over dy and x: sum(dy)
// and sum(dy * (x - mean)).  With y given, dy is read where the forward's
// output y > 0 and as 0 elsewhere (the fused ReLU's backward, NaN outputs
// masked too), adding the same terms in the same order as the unmasked loop
// would after a separate ReLU backward (a masked term adds +0, as its zero
// would).
template <typename A, typename T>
void run_grad_sums(const T* dy, const T* y, const T* x, int64_t n, A mean, double& sum_dy,
                   double& sum_dy_xmu) {
  for (int64_t i0 = 0; i0 < n; i0 += kSumChunk) {
    const int64_t i1 = std::min(n, i0 + kSumChunk);
    A acc = 0, dot = 0;
    if (y != nullptr) {
#pragma omp simd reduction(+ : acc, dot)
      for (int64_t i = i0; i < i1; ++i) {
        const A g = y[i] > T(0) ? static_cast<A>(dy[i]) : A(0);
        acc += g;
        dot += g * (static_cast<A>(x[i]) - mean);
      }
    } else {
#pragma omp simd reduction(+ : acc, dot)
      for (int64_t i = i0; i < i1; ++i) {
        const A g = static_cast<A>(dy[i]);
        acc += g;
        dot += g * (static_cast<A>(x[i]) - mean);
      }
    }
    sum_dy += static_cast<double>(acc);
    sum_dy_xmu += static_cast<double>(dot);
  }
}

// y = a * x + b, plus the residual r[i] when r is given, then max(y, 0)
// with relu (NaN stays NaN, as ReLU's).  The same arithmetic as batch norm,
// then an add, then a ReLU, each in A.
template <typename A, typename T>
void run_affine(const T* x, const T* r, int64_t n, A a, A b, T* y, bool relu) {
  if (r != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const A v = (static_cast<A>(x[i]) * a + b) + static_cast<A>(r[i]);
      y[i] = static_cast<T>(relu && v < A(0) ? A(0) : v);
    }
    return;
  }
  if (relu) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const A v = static_cast<A>(x[i]) * a + b;
      y[i] = static_cast<T>(v < A(0) ? A(0) : v);
    }
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(static_cast<A>(x[i]) * a + b);
}

// dx = a * dy + b * (x - m) + k over a run, dy masked by y when y is given.
// x - m first, as PyTorch's: b * x and b * m are each far larger than dx
// where a channel's mean dwarfs its spread, and their difference would keep
// their rounding errors.
template <typename A, typename T>
void run_dx(const T* dy, const T* y, const T* x, int64_t n, A a, A b, A m, A k, T* dx) {
  if (y != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const A g = y[i] > T(0) ? static_cast<A>(dy[i]) : A(0);
      dx[i] = static_cast<T>(a * g + b * (static_cast<A>(x[i]) - m) + k);
    }
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dx[i] = static_cast<T>(a * static_cast<A>(dy[i]) + b * (static_cast<A>(x[i]) - m) + k);
}

// bfloat16 runs: widened a chunk at a time into float32 buffers on the stack
// (vectorised, Bfloat16Runs.h), then the float32 loops above; outputs
// rounded back a chunk at a time.  Sums add the chunks' float sums in double.
constexpr int64_t kChunk = kSumChunk;

template <typename A>
double run_sum(const BFloat16* x, int64_t n) {
  float buf[kChunk];
  double total = 0;
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    widen_bfloat16(x + i, buf, len);
    total += run_sum<float>(buf, len);
  }
  return total;
}

template <typename A>
double run_sq_dev(const BFloat16* x, int64_t n, float mean) {
  float buf[kChunk];
  double total = 0;
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    widen_bfloat16(x + i, buf, len);
    total += run_sq_dev<float>(buf, len, mean);
  }
  return total;
}

// Both sums from one widening of each chunk (the same chunk sums as
// run_sum and run_dot_dev would give), dy masked by y when y is given.
template <typename A>
void run_grad_sums(const BFloat16* dy, const BFloat16* y, const BFloat16* x, int64_t n,
                   float mean, double& sum_dy, double& sum_dy_xmu) {
  float gbuf[kChunk], ybuf[kChunk], xbuf[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    const float* g = load_relu_grad<float>(dy + i, y ? y + i : nullptr, len, gbuf, ybuf);
    widen_bfloat16(x + i, xbuf, len);
    sum_dy += run_sum<float>(g, len);
    sum_dy_xmu += run_dot_dev<float>(g, xbuf, len, mean);
  }
}

// x of bfloat16 (xf: of float, already widened), r of bfloat16 or null.
// With r, batch norm's value is rounded to bfloat16 before the add, as the
// separate ops would round it: the same bits as batch norm, `+`, ReLU.
template <typename A>
void run_affine(const float* xf, const BFloat16* r, int64_t n, float a, float b, BFloat16* y,
                bool relu) {
  float buf[kChunk], rbuf[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    if (r == nullptr) {
      run_affine<float>(xf + i, static_cast<const float*>(nullptr), len, a, b, buf, relu);
    } else {
      widen_bfloat16(r + i, rbuf, len);
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) {
        const float v = round_through_bfloat16(xf[i + j] * a + b) + rbuf[j];
        buf[j] = relu && v < 0.0f ? 0.0f : v;
      }
    }
    narrow_to_bfloat16(buf, y + i, len);
  }
}

template <typename A>
void run_affine(const BFloat16* x, const BFloat16* r, int64_t n, float a, float b, BFloat16* y,
                bool relu) {
  float buf[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    widen_bfloat16(x + i, buf, len);
    run_affine<A>(buf, r + (r != nullptr ? i : 0), len, a, b, y + i, relu);
  }
}

template <typename A>
void run_dx(const BFloat16* dy, const BFloat16* y, const BFloat16* x, int64_t n, float a,
            float b, float m, float k, BFloat16* dx) {
  float gbuf[kChunk], ybuf[kChunk], xbuf[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    load_relu_grad<float>(dy + i, y ? y + i : nullptr, len, gbuf, ybuf);
    widen_bfloat16(x + i, xbuf, len);
    run_dx<float>(gbuf, static_cast<const float*>(nullptr), xbuf, len, a, b, m, k, gbuf);
    narrow_to_bfloat16(gbuf, dx + i, len);
  }
}

// A bfloat16 channel of at most kChannelFloats values is widened once into a
// per-thread float32 buffer (it stays in cache), and the passes run on that
// instead of widening bfloat16 from memory each time: one read of the input
// instead of three in the forward, two of each operand instead of three of
// the gradient in the backward.  The chunks and their sums are those of the
// loops above, so the results are the same bits.
constexpr int64_t kChannelFloats = int64_t{1} << 16;  // 256 KiB

float* channel_buffer(int k, int64_t n) {
  static thread_local std::vector<float> buffers[3];
  if (static_cast<int64_t>(buffers[k].size()) < n) buffers[k].resize(n);
  return buffers[k].data();
}

bool channel_fits(const BatchNormShape& s) { return s.batch * s.spatial <= kChannelFloats; }

// The N runs of channel c (stride C * S apart) into buf, back to back.
void widen_channel(const BatchNormShape& s, const BFloat16* x, int64_t c, float* buf) {
  const int64_t C = s.channels, S = s.spatial;
  for (int64_t n = 0; n < s.batch; ++n) widen_bfloat16(x + (n * C + c) * S, buf + n * S, S);
}

// Per run of S widened values, the backward's two sums as the bfloat16 loops make them.
void chunked_grad_sums(const float* dy, const float* x, int64_t n, float mean, double& sum_dy,
                       double& sum_dy_xmu) {
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    sum_dy += run_sum<float>(dy + i, len);
    sum_dy_xmu += run_dot_dev<float>(dy + i, x + i, len, mean);
  }
}

// Stores channel c's mean m, biased variance (sq / count) and 1 / sqrt(var +
// eps), and returns the map y = a * x + shift that normalises and scales it.
template <typename A>
std::pair<A, A> channel_affine(A m, double sq, double count, double eps, const A* weight,
                               const A* bias, int64_t c, A* mean, A* var, A* invstd) {
  const double v = sq / count;
  const double is = 1.0 / std::sqrt(v + eps);
  mean[c] = m;
  var[c] = static_cast<A>(v);
  invstd[c] = static_cast<A>(is);
  const double w = weight ? static_cast<double>(weight[c]) : 1.0;
  const double b = bias ? static_cast<double>(bias[c]) : 0.0;
  return {static_cast<A>(w * is), static_cast<A>(b - static_cast<double>(m) * w * is)};
}

// Statistics, mean/var/invstd and output of one cached bfloat16 channel.
void train_forward_cached(const BatchNormShape& s, const BFloat16* x, const BFloat16* r,
                          const float* weight, const float* bias, double eps, BFloat16* y,
                          float* mean, float* var, float* invstd, int64_t c) {
  const int64_t C = s.channels, S = s.spatial;
  float* xf = channel_buffer(0, s.batch * S);
  widen_channel(s, x, c, xf);
  double sum = 0;
  for (int64_t n = 0; n < s.batch; ++n) sum += run_sum<float>(xf + n * S, S);
  const double count = static_cast<double>(s.batch * S);
  const float m = static_cast<float>(sum / count);
  double sq = 0;
  for (int64_t n = 0; n < s.batch; ++n) sq += run_sq_dev<float>(xf + n * S, S, m);
  const auto [a, shift] = channel_affine<float>(m, sq, count, eps, weight, bias, c, mean, var, invstd);
  for (int64_t n = 0; n < s.batch; ++n) {
    const int64_t off = (n * C + c) * S;
    run_affine<float>(xf + n * S, r != nullptr ? r + off : nullptr, S, a, shift, y + off, s.relu);
  }
}

}  // namespace

template <typename T, typename A>
void batch_norm_train_forward(const BatchNormShape& s, const T* x, const T* r, const A* weight,
                              const A* bias, double eps, T* y, A* mean, A* var, A* invstd) {
  if (s.channels_last)
    return batch_norm_train_forward_channels_last<T, A>(s, x, r, weight, bias, eps, y, mean, var,
                                                        invstd);
  if (!s.residual) r = nullptr;
  const int64_t C = s.channels, S = s.spatial;
  const double count = static_cast<double>(s.batch * S);
  for_channels(s, [&](int64_t c) {
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (channel_fits(s))
        return train_forward_cached(s, x, r, weight, bias, eps, y, mean, var, invstd, c);
    }
    double sum = 0;
    for (int64_t n = 0; n < s.batch; ++n) sum += run_sum<A>(x + (n * C + c) * S, S);
    const A m = static_cast<A>(sum / count);
    double sq = 0;
    for (int64_t n = 0; n < s.batch; ++n) sq += run_sq_dev<A>(x + (n * C + c) * S, S, m);
    const auto [a, shift] = channel_affine<A>(m, sq, count, eps, weight, bias, c, mean, var, invstd);
    for (int64_t n = 0; n < s.batch; ++n) {
      const int64_t off = (n * C + c) * S;
      run_affine<A>(x + off, r != nullptr ? r + off : nullptr, S, a, shift, y + off, s.relu);
    }
  });
}

template <typename T, typename A>
void batch_norm_apply(const BatchNormShape& s, const T* x, const T* r, const A* mean,
                      const A* invstd, const A* weight, const A* bias, T* y) {
  if (s.channels_last)
    return batch_norm_apply_channels_last<T, A>(s, x, r, mean, invstd, weight, bias, y);
  if (!s.residual) r = nullptr;
  const int64_t C = s.channels, S = s.spatial;
  for_channels(s, [&](int64_t c) {
    const double w = weight ? static_cast<double>(weight[c]) : 1.0;
    const double b = bias ? static_cast<double>(bias[c]) : 0.0;
    const double is = static_cast<double>(invstd[c]);
    const A a = static_cast<A>(w * is);
    const A shift = static_cast<A>(b - static_cast<double>(mean[c]) * w * is);
    for (int64_t n = 0; n < s.batch; ++n) {
      const int64_t off = (n * C + c) * S;
      run_affine<A>(x + off, r != nullptr ? r + off : nullptr, S, a, shift, y + off, s.relu);
    }
  });
}

template <typename T, typename A>
void batch_norm_backward(const BatchNormShape& s, const T* grad_out, const T* y, const T* x,
                         const A* mean, const A* invstd, const A* weight, bool training,
                         T* grad_input, A* grad_weight, A* grad_bias) {
  if (s.channels_last)
    return batch_norm_backward_channels_last<T, A>(s, grad_out, y, x, mean, invstd, weight,
                                                   training, grad_input, grad_weight, grad_bias);
  if (!s.relu) y = nullptr;
  const int64_t C = s.channels, S = s.spatial;
  const double count = static_cast<double>(s.batch * S);
  for_channels(s, [&](int64_t c) {
    const A m = mean[c];
    double sum_dy = 0, sum_dy_xmu = 0;
    // bfloat16 channels that fit are widened once (see kChannelFloats), the
    // gradient masked as it is widened.
    float* gf = nullptr;
    float* xf = nullptr;
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (channel_fits(s)) {
        gf = channel_buffer(0, s.batch * S);
        xf = channel_buffer(1, s.batch * S);
        widen_channel(s, grad_out, c, gf);
        widen_channel(s, x, c, xf);
        if (y != nullptr) {
          float* yf = channel_buffer(2, s.batch * S);
          widen_channel(s, y, c, yf);
#pragma omp simd
          for (int64_t i = 0; i < s.batch * S; ++i) gf[i] = yf[i] > 0.0f ? gf[i] : 0.0f;
        }
      }
    }
    for (int64_t n = 0; n < s.batch; ++n) {
      const int64_t off = (n * C + c) * S;
      if (gf != nullptr)
        chunked_grad_sums(gf + n * S, xf + n * S, S, m, sum_dy, sum_dy_xmu);
      else
        run_grad_sums<A>(grad_out + off, y ? y + off : nullptr, x + off, S, m, sum_dy,
                         sum_dy_xmu);
    }
    const double is = static_cast<double>(invstd[c]);
    if (grad_weight) grad_weight[c] = static_cast<A>(sum_dy_xmu * is);
    if (grad_bias) grad_bias[c] = static_cast<A>(sum_dy);
    if (!grad_input) return;
    const double w = weight ? static_cast<double>(weight[c]) : 1.0;
    // dx = a * dy + b * (x - m) + k
    const double a = w * is;
    double b = 0, k = 0;
    if (training) {
      b = -w * is * is * is * (sum_dy_xmu / count);
      k = -w * is * (sum_dy / count);
    }
    const A ta = static_cast<A>(a), tb = static_cast<A>(b), tk = static_cast<A>(k);
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (gf != nullptr) {
        run_dx<float>(gf, static_cast<const float*>(nullptr), xf, s.batch * S, ta, tb, m, tk,
                      gf);
        for (int64_t n = 0; n < s.batch; ++n)
          narrow_to_bfloat16(gf + n * S, grad_input + (n * C + c) * S, S);
        return;
      }
    }
    for (int64_t n = 0; n < s.batch; ++n) {
      const int64_t off = (n * C + c) * S;
      run_dx<A>(grad_out + off, y ? y + off : nullptr, x + off, S, ta, tb, m, tk,
                grad_input + off);
    }
  });
}

#define LOOM_BN_FORWARD(T, A)                                                                  \
  template void batch_norm_train_forward<T, A>(const BatchNormShape&, const T*, const T*,      \
                                               const A*, const A*, double, T*, A*, A*, A*);    \
  template void batch_norm_apply<T, A>(const BatchNormShape&, const T*, const T*, const A*,    \
                                       const A*, const A*, const A*, T*);
LOOM_BN_FORWARD(float, float)
LOOM_BN_FORWARD(double, double)
LOOM_BN_FORWARD(BFloat16, float)
#undef LOOM_BN_FORWARD
template void batch_norm_backward<float>(const BatchNormShape&, const float*, const float*,
                                         const float*, const float*, const float*, const float*,
                                         bool, float*, float*, float*);
template void batch_norm_backward<double>(const BatchNormShape&, const double*, const double*,
                                          const double*, const double*, const double*,
                                          const double*, bool, double*, double*, double*);
template void batch_norm_backward<BFloat16, float>(const BatchNormShape&, const BFloat16*,
                                                   const BFloat16*, const BFloat16*, const float*,
                                                   const float*, const float*, bool, BFloat16*,
                                                   float*, float*);

// ---- the dispatch slots (native/Normalization.h) ----------------------------------

namespace {

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

// The slots' bodies for activations of T and statistics/parameters of A.
template <typename T, typename A>
void batch_norm_typed(const BatchNormShape& s, const Tensor& x, const Tensor& residual,
                      const Tensor& weight,
                      const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                      bool training, double momentum, double eps, const Tensor& out,
                      const Tensor& save_mean, const Tensor& save_invstd) {
  const int64_t count = s.batch * s.spatial;
  A* mean = static_cast<A*>(save_mean.data_ptr());
  A* invstd = static_cast<A*>(save_invstd.data_ptr());
  const T* r = cptr<T>(residual);  // null unless s.residual
  if (training) {
    std::vector<A> var(s.channels);
    batch_norm_train_forward<T, A>(s, cptr<T>(x), r, cptr<A>(weight), cptr<A>(bias), eps,
                                   static_cast<T*>(out.data_ptr()), mean, var.data(), invstd);
    if (running_mean.defined()) {
      // running = (1 - momentum) * running + momentum * batch (variance unbiased).
      Tensor rm = native::contiguous(running_mean), rv = native::contiguous(running_var);
      A* pm = static_cast<A*>(rm.data_ptr());
      A* pv = static_cast<A*>(rv.data_ptr());
      const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
      for (int64_t c = 0; c < s.channels; ++c) {
        pm[c] = static_cast<A>((1 - momentum) * pm[c] + momentum * mean[c]);
        pv[c] = static_cast<A>((1 - momentum) * pv[c] + momentum * var[c] * unbias);
      }
      if (!rm.is_same(running_mean)) native::copy_(running_mean, rm);
      if (!rv.is_same(running_var)) native::copy_(running_var, rv);
      running_mean.bump_version();
      running_var.bump_version();
    }
  } else {
    const Tensor rm = native::contiguous(running_mean), rv = native::contiguous(running_var);
    const A* pm = cptr<A>(rm);
    const A* pv = cptr<A>(rv);
    for (int64_t c = 0; c < s.channels; ++c) {
      mean[c] = pm[c];
      invstd[c] = static_cast<A>(1.0 / std::sqrt(static_cast<double>(pv[c]) + eps));
    }
    batch_norm_apply<T, A>(s, cptr<T>(x), r, mean, invstd, cptr<A>(weight), cptr<A>(bias),
                           static_cast<T*>(out.data_ptr()));
  }
}

// x and out of float32, float64 or bfloat16; the statistics and parameters
// of x's dtype, float32 for bfloat16 (native::batch_norm sees to it).
void batch_norm_kernel(const BatchNormShape& s, const Tensor& x, const Tensor& residual,
                       const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double momentum, double eps,
                       const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd) {
  if (x.dtype() == kBFloat16)
    return batch_norm_typed<BFloat16, float>(s, x, residual, weight, bias, running_mean,
                                             running_var, training, momentum, eps, out, save_mean,
                                             save_invstd);
  dispatch_floating(x.dtype(), "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    batch_norm_typed<T, T>(s, x, residual, weight, bias, running_mean, running_var, training,
                           momentum, eps, out, save_mean, save_invstd);
  });
}

template <typename T, typename A>
void batch_norm_backward_typed(const BatchNormShape& s, const Tensor& grad_output,
                               const Tensor& y, const Tensor& x, const Tensor& weight,
                               const Tensor& save_mean, const Tensor& save_invstd, bool training,
                               const Tensor& grad_input, const Tensor& grad_weight,
                               const Tensor& grad_bias) {
  auto out = [](const Tensor& t, auto* type) {
    return t.defined() ? static_cast<decltype(type)>(t.data_ptr()) : nullptr;
  };
  batch_norm_backward<T, A>(s, cptr<T>(grad_output), cptr<T>(y), cptr<T>(x), cptr<A>(save_mean),
                            cptr<A>(save_invstd), cptr<A>(weight), training,
                            out(grad_input, static_cast<T*>(nullptr)),
                            out(grad_weight, static_cast<A*>(nullptr)),
                            out(grad_bias, static_cast<A*>(nullptr)));
}

void batch_norm_backward_kernel(const BatchNormShape& s, const Tensor& grad_output,
                                const Tensor& y, const Tensor& x, const Tensor& weight,
                                const Tensor& save_mean, const Tensor& save_invstd, bool training,
                                const Tensor& grad_input, const Tensor& grad_weight,
                                const Tensor& grad_bias) {
  if (x.dtype() == kBFloat16)
    return batch_norm_backward_typed<BFloat16, float>(s, grad_output, y, x, weight, save_mean,
                                                      save_invstd, training, grad_input,
                                                      grad_weight, grad_bias);
  dispatch_floating(x.dtype(), "batch_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    batch_norm_backward_typed<T, T>(s, grad_output, y, x, weight, save_mean, save_invstd,
                                    training, grad_input, grad_weight, grad_bias);
  });
}

// bfloat16 batch norm runs as it is (float32 statistics and arithmetic).
bool batch_norm_takes_kernel(DType dtype) { return dtype == kBFloat16; }

// Every kernel here applies BatchNormShape::relu (and the residual before
// it): the forward in the pass that writes the output, the backward as it
// reads the output gradient.
bool batch_norm_fuses_relu_kernel(DType) { return true; }

// Channels-last inputs of every dtype the kernels take run as they are.
bool batch_norm_channels_last_kernel(DType dtype) {
  return dtype == kFloat32 || dtype == kFloat64 || dtype == kBFloat16;
}

}  // namespace

static const native::RegisterKernel reg_batch_norm_fuses_relu(native::batch_norm_fuses_relu_stub,
                                                              kCPU, &batch_norm_fuses_relu_kernel);
static const native::RegisterKernel reg_batch_norm_channels_last(
    native::batch_norm_channels_last_stub, kCPU, &batch_norm_channels_last_kernel);
static const native::RegisterKernel reg_batch_norm_takes(native::batch_norm_takes_stub, kCPU,
                                                         &batch_norm_takes_kernel);
static const native::RegisterKernel reg_batch_norm(native::batch_norm_stub, kCPU,
                                                   &batch_norm_kernel);
static const native::RegisterKernel reg_batch_norm_backward(native::batch_norm_backward_stub,
                                                            kCPU, &batch_norm_backward_kernel);

}  // namespace cpu
}  // namespace loom
