// Batch-norm kernels over a channels-last input (Normalization.h): the
// values are (batch * spatial) rows of C channels, so every pass walks whole
// rows with the channel as the vectorised inner index.  The training forward
// reads the input twice (both statistics in one pass, then the output), the
// backward twice (both sums, then the input gradient).  The rows are cut into
// blocks of a fixed size; each block's per-channel sums (in A, then added in
// double) land in their own slot and are added in block order afterwards, so
// the results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/cpu/Bfloat16Runs.h"
#include "tensor/cpu/Normalization.h"

namespace loom {
namespace cpu {
namespace {

constexpr int64_t kRowsPerBlock = 128;
// Channels handled at a time within a row (bfloat16 rows are widened this
// many values at a time into a stack buffer).
constexpr int64_t kColumns = 512;

int64_t rows_of(const BatchNormShape& s) { return s.batch * s.spatial; }
int64_t blocks_of(const BatchNormShape& s) {
  return (rows_of(s) + kRowsPerBlock - 1) / kRowsPerBlock;
}

// Calls fn(block, first_row, end_row) for every block, over the threads.
template <typename Fn>
void for_blocks(const BatchNormShape& s, const Fn& fn) {
  const int64_t rows = rows_of(s);
  parallel_for(0, blocks_of(s), 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      fn(b, b * kRowsPerBlock, std::min(rows, (b + 1) * kRowsPerBlock));
  });
}

// Per-channel sums over every row: sums[c] (double) = sum over rows of
// term(c0, n, row values of columns [c0, c0 + n), acc) which adds each
// row's terms into acc[0..n).  `count` sums are made at once (the backward
// makes two), acc and sums holding them one after the other.
template <typename A, int kSums, typename Term>
std::vector<double> channel_sums(const BatchNormShape& s, const Term& term) {
  const int64_t C = s.channels, blocks = blocks_of(s);
  std::vector<double> partial(static_cast<size_t>(blocks * kSums * C));
  for_blocks(s, [&](int64_t b, int64_t r0, int64_t r1) {
    A acc[kSums][kColumns];
    for (int64_t c0 = 0; c0 < C; c0 += kColumns) {
      const int64_t n = std::min(kColumns, C - c0);
      for (int k = 0; k < kSums; ++k) std::fill(acc[k], acc[k] + n, A(0));
      for (int64_t r = r0; r < r1; ++r) term(r, c0, n, acc);
      for (int k = 0; k < kSums; ++k)
        for (int64_t c = 0; c < n; ++c)
          partial[static_cast<size_t>((b * kSums + k) * C + c0 + c)] = acc[k][c];
    }
  });
  std::vector<double> sums(static_cast<size_t>(kSums * C), 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < kSums * C; ++i) sums[i] += partial[b * kSums * C + i];
  return sums;
}

// y = a[c] * x + shift[c] over every row, plus the residual with
// s.residual, then max(y, 0) with s.relu (NaN stays NaN, as ReLU's).
template <typename T, typename A>
void affine_rows(const BatchNormShape& s, const T* x, const T* residual, const A* a,
                 const A* shift, T* y) {
  const int64_t C = s.channels;
  for_blocks(s, [&](int64_t, int64_t r0, int64_t r1) {
    A in[kColumns], res[kColumns], out[kColumns];
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c0 = 0; c0 < C; c0 += kColumns) {
        const int64_t n = std::min(kColumns, C - c0);
        const A* v = load_run<A>(x + r * C + c0, n, in);
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) out[c] = v[c] * a[c0 + c] + shift[c0 + c];
        if (s.residual) {
          // Batch norm's value as its tensor would hold it, then the add
          // (the same bits as the separate ops).
          if constexpr (std::is_same_v<T, BFloat16>) {
#pragma omp simd
            for (int64_t c = 0; c < n; ++c) out[c] = round_through_bfloat16(out[c]);
          }
          const A* add = load_run<A>(residual + r * C + c0, n, res);
#pragma omp simd
          for (int64_t c = 0; c < n; ++c) out[c] += add[c];
        }
        if (s.relu) {
#pragma omp simd
          for (int64_t c = 0; c < n; ++c) out[c] = out[c] < A(0) ? A(0) : out[c];
        }
        store_run<A>(out, n, y + r * C + c0);
      }
  });
}

}  // namespace

template <typename T, typename A>
void batch_norm_train_forward_channels_last(const BatchNormShape& s, const T* x,
                                            const T* residual, const A* weight, const A* bias,
                                            double eps, T* y, A* mean, A* var, A* invstd) {
  const int64_t C = s.channels;
  const double count = static_cast<double>(rows_of(s));
  // One pass for both statistics: sums of d = x - k and d * d, shifted by
  // each channel's first value k (close to its mean at the scale of its
  // spread, so the variance sum(d^2) / n - mean(d)^2 does not cancel).
  std::vector<A> k(C);
  {
    A buf[kColumns];
    for (int64_t c0 = 0; c0 < C; c0 += kColumns) {
      const int64_t n = std::min(kColumns, C - c0);
      const A* v = load_run<A>(x + c0, n, buf);
      std::copy(v, v + n, k.data() + c0);
    }
  }
  const std::vector<double> sums =
      channel_sums<A, 2>(s, [&](int64_t r, int64_t c0, int64_t n, A (*acc)[kColumns]) {
        A buf[kColumns];
        const A* v = load_run<A>(x + r * C + c0, n, buf);
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) {
          const A d = v[c] - k[c0 + c];
          acc[0][c] += d;
          acc[1][c] += d * d;
        }
      });
  std::vector<A> m(C);
  std::vector<double> sq(C);
  for (int64_t c = 0; c < C; ++c) {
    const double shifted_mean = sums[c] / count;
    m[c] = static_cast<A>(static_cast<double>(k[c]) + shifted_mean);
    sq[c] = std::max(0.0, sums[C + c] - shifted_mean * sums[c]);  // sum((x - mean)^2)
  }
  std::vector<A> a(C), shift(C);
  for (int64_t c = 0; c < C; ++c) {
    const double v = sq[c] / count;
    const double is = 1.0 / std::sqrt(v + eps);
    mean[c] = m[c];
    var[c] = static_cast<A>(v);
    invstd[c] = static_cast<A>(is);
    const double w = weight ? static_cast<double>(weight[c]) : 1.0;
    const double b = bias ? static_cast<double>(bias[c]) : 0.0;
    a[c] = static_cast<A>(w * is);
    shift[c] = static_cast<A>(b - static_cast<double>(m[c]) * w * is);
  }
  affine_rows<T, A>(s, x, residual, a.data(), shift.data(), y);
}

template <typename T, typename A>
void batch_norm_apply_channels_last(const BatchNormShape& s, const T* x, const T* residual,
                                    const A* mean, const A* invstd, const A* weight,
                                    const A* bias, T* y) {
  const int64_t C = s.channels;
  std::vector<A> a(C), shift(C);
  for (int64_t c = 0; c < C; ++c) {
    const double w = weight ? static_cast<double>(weight[c]) : 1.0;
    const double b = bias ? static_cast<double>(bias[c]) : 0.0;
    const double is = static_cast<double>(invstd[c]);
    a[c] = static_cast<A>(w * is);
    shift[c] = static_cast<A>(b - static_cast<double>(mean[c]) * w * is);
  }
  affine_rows<T, A>(s, x, residual, a.data(), shift.data(), y);
}

template <typename T, typename A>
void batch_norm_backward_channels_last(const BatchNormShape& s, const T* grad_out, const T* y,
                                       const T* x, const A* mean, const A* invstd,
                                       const A* weight, bool training, T* grad_input,
                                       A* grad_weight, A* grad_bias) {
  const int64_t C = s.channels;
  if (!s.relu) y = nullptr;
  // Row r's gradient through the fused ReLU's mask (when y is given).
  auto grad_row = [&](int64_t r, int64_t c0, int64_t n, A* gbuf, A* ybuf) {
    return load_relu_grad<A>(grad_out + r * C + c0, y ? y + r * C + c0 : nullptr, n, gbuf, ybuf);
  };
  const double count = static_cast<double>(rows_of(s));
  // sums[c]: sum(dy); sums[C + c]: sum(dy * (x - mean)).
  const std::vector<double> sums =
      channel_sums<A, 2>(s, [&](int64_t r, int64_t c0, int64_t n, A (*acc)[kColumns]) {
        A gbuf[kColumns], ybuf[kColumns], xbuf[kColumns];
        const A* g = grad_row(r, c0, n, gbuf, ybuf);
        const A* v = load_run<A>(x + r * C + c0, n, xbuf);
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) {
          acc[0][c] += g[c];
          acc[1][c] += g[c] * (v[c] - mean[c0 + c]);
        }
      });
  std::vector<A> ca(C), cb(C), ck(C);
  for (int64_t c = 0; c < C; ++c) {
    const double sum_dy = sums[c], sum_dy_xmu = sums[C + c];
    const double is = static_cast<double>(invstd[c]);
    if (grad_weight) grad_weight[c] = static_cast<A>(sum_dy_xmu * is);
    if (grad_bias) grad_bias[c] = static_cast<A>(sum_dy);
    const double w = weight ? static_cast<double>(weight[c]) : 1.0;
    // dx = a * dy + b * (x - mean) + k, as in the NCHW kernel.
    double b = 0, k = 0;
    if (training) {
      b = -w * is * is * is * (sum_dy_xmu / count);
      k = -w * is * (sum_dy / count);
    }
    ca[c] = static_cast<A>(w * is);
    cb[c] = static_cast<A>(b);
    ck[c] = static_cast<A>(k);
  }
  if (!grad_input) return;
  for_blocks(s, [&](int64_t, int64_t r0, int64_t r1) {
    A gbuf[kColumns], ybuf[kColumns], xbuf[kColumns], out[kColumns];
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c0 = 0; c0 < C; c0 += kColumns) {
        const int64_t n = std::min(kColumns, C - c0);
        const A* g = grad_row(r, c0, n, gbuf, ybuf);
        const A* v = load_run<A>(x + r * C + c0, n, xbuf);
#pragma omp simd
        for (int64_t c = 0; c < n; ++c)
          out[c] = ca[c0 + c] * g[c] + cb[c0 + c] * (v[c] - mean[c0 + c]) + ck[c0 + c];
        store_run<A>(out, n, grad_input + r * C + c0);
      }
  });
}

#define LOOM_BN_CHANNELS_LAST(T, A)                                                            \
  template void batch_norm_train_forward_channels_last<T, A>(                                  \
      const BatchNormShape&, const T*, const T*, const A*, const A*, double, T*, A*, A*, A*);  \
  template void batch_norm_apply_channels_last<T, A>(const BatchNormShape&, const T*,          \
                                                     const T*, const A*, const A*, const A*,   \
                                                     const A*, T*);                            \
  template void batch_norm_backward_channels_last<T, A>(const BatchNormShape&, const T*,       \
                                                        const T*, const T*, const A*,          \
                                                        const A*, const A*, bool, T*, A*, A*);
LOOM_BN_CHANNELS_LAST(float, float)
LOOM_BN_CHANNELS_LAST(double, double)
LOOM_BN_CHANNELS_LAST(BFloat16, float)
#undef LOOM_BN_CHANNELS_LAST

}  // namespace cpu
}  // namespace loom
