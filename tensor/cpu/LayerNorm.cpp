// CPU layer-norm kernels over a contiguous (M, N) input (see
// tensor/native/LayerNorm.h), registered into layer_norm_stub and
// layer_norm_backward_stub.  Values are centred as (x - mean) - dm, dm the
// rounding error of the stored mean (cpu/NormStats.h).
//
// Forward: parallel over rows; each row's statistics in double, then one
// fused pass y = ((x - mean) - dm) * rstd * w + b.
//
// Backward: the rows are cut into at most kBlocks blocks (the cut depends only
// on M and N, never on the thread count, so results are reproducible), run in
// parallel.  A block walks its rows once: per row its dm, the sums of the
// input gradient (double), the row of dx, and its share of dw / db into the
// block's own (N) double partials.  The partials are then summed block by
// block in a fixed order, parallel over columns.  Per row, with g = dy * w
// and e = (x - mean) - dm the centred values:
//   A = sum_j g_j,   B = sum_j g_j e_j
//   dx_j = rstd * g_j - rstd * A / N - rstd^3 * B / N * e_j
//   dw_j += dy_j * e_j * rstd,   db_j += dy_j
#include <algorithm>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/cpu/NormStats.h"
#include "tensor/native/LayerNorm.h"

namespace loom {
namespace cpu {
namespace {

constexpr int64_t kBlocks = 64;    // most row blocks of the backward
constexpr int64_t kGrain = 16384;  // values per task, at least

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}
template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

// One row: its statistics, then y.
template <typename T>
void forward_row(const T* x, const T* w, const T* b, int64_t N, double eps, T* y, T& mean,
                 T& rstd) {
  const Moments s = moments(x, N, eps);
  const T m = static_cast<T>(s.mean), r = static_cast<T>(s.rstd);
  const T dm = static_cast<T>(s.mean - static_cast<double>(m));
  mean = m;
  rstd = r;
  if (w && b) {
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) y[j] = ((x[j] - m) - dm) * r * w[j] + b[j];
  } else if (w) {
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) y[j] = ((x[j] - m) - dm) * r * w[j];
  } else if (b) {
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) y[j] = ((x[j] - m) - dm) * r + b[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) y[j] = ((x[j] - m) - dm) * r;
  }
}

template <typename T>
void forward(const T* x, const T* w, const T* b, int64_t M, int64_t N, double eps, T* y, T* mean,
             T* rstd) {
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(N, 1));
  parallel_for(0, M, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
      forward_row(x + i * N, w, b, N, eps, y + i * N, mean[i], rstd[i]);
  });
}

// dx of one row (see the note at the top); delta: dm in double.
template <typename T>
void row_grad_input(const T* dy, const T* x, const T* w, int64_t N, T m, double delta, T r,
                    T* dx) {
  double A = 0, B = 0;
  if (w) {
#pragma omp simd reduction(+ : A, B)
    for (int64_t j = 0; j < N; ++j) {
      const double g = static_cast<double>(dy[j]) * static_cast<double>(w[j]);
      A += g;
      B += g * static_cast<double>(x[j] - m);
    }
  } else {
#pragma omp simd reduction(+ : A, B)
    for (int64_t j = 0; j < N; ++j) {
      const double g = static_cast<double>(dy[j]);
      A += g;
      B += g * static_cast<double>(x[j] - m);
    }
  }
  B -= delta * A;  // sum g (x - mean) -> sum g e
  const double rd = static_cast<double>(r), n = static_cast<double>(N);
  const T c0 = static_cast<T>(-rd * A / n);
  const T b1 = static_cast<T>(-rd * rd * rd * B / n);
  const T dm = static_cast<T>(delta);
  if (w) {
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) dx[j] = r * w[j] * dy[j] + b1 * ((x[j] - m) - dm) + c0;
  } else {
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) dx[j] = r * dy[j] + b1 * ((x[j] - m) - dm) + c0;
  }
}

template <typename T>
void backward(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, int64_t M,
              int64_t N, T* dx, T* dw, T* db) {
  const bool params = dw || db;
  const int64_t blocks = std::max<int64_t>(1, std::min({kBlocks, M, M * N / kGrain}));
  const int64_t rows_per_block = (M + blocks - 1) / blocks;
  // (blocks, N) partial sums of dy * e * rstd and dy
  std::vector<double> part_w(params ? blocks * N : 0), part_b(params ? blocks * N : 0);
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      double* pw = params ? part_w.data() + blk * N : nullptr;
      double* pb = params ? part_b.data() + blk * N : nullptr;
      const int64_t end = std::min(M, (blk + 1) * rows_per_block);
      for (int64_t i = blk * rows_per_block; i < end; ++i) {
        const T* dyr = dy + i * N;
        const T* xr = x + i * N;
        const T m = mean[i], r = rstd[i];
        const double delta = N > 0 ? centred_sum(xr, N, m) / static_cast<double>(N) : 0.0;
        if (dx) row_grad_input(dyr, xr, w, N, m, delta, r, dx + i * N);
        if (params) {
          const T dm = static_cast<T>(delta);
#pragma omp simd
          for (int64_t j = 0; j < N; ++j) {
            pw[j] += static_cast<double>(dyr[j]) * static_cast<double>(((xr[j] - m) - dm) * r);
            pb[j] += static_cast<double>(dyr[j]);
          }
        }
      }
    }
  });
  if (!params) return;
  parallel_for(0, N, std::max<int64_t>(1, kGrain / blocks), [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      double sw = 0, sb = 0;
      for (int64_t blk = 0; blk < blocks; ++blk) {
        sw += part_w[blk * N + j];
        sb += part_b[blk * N + j];
      }
      if (dw) dw[j] = static_cast<T>(sw);
      if (db) db[j] = static_cast<T>(sb);
    }
  });
}

void layer_norm_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t M,
                       int64_t N, double eps, const Tensor& out, const Tensor& mean,
                       const Tensor& rstd) {
  dispatch_floating(input.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward<T>(cptr<T>(input), cptr<T>(weight), cptr<T>(bias), M, N, eps, ptr<T>(out),
               ptr<T>(mean), ptr<T>(rstd));
  });
}

void layer_norm_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& mean,
                                const Tensor& rstd, const Tensor& weight, int64_t M, int64_t N,
                                const Tensor& grad_input, const Tensor& grad_weight,
                                const Tensor& grad_bias) {
  dispatch_floating(input.dtype(), "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward<T>(cptr<T>(grad_out), cptr<T>(input), cptr<T>(mean), cptr<T>(rstd), cptr<T>(weight),
                M, N, ptr<T>(grad_input), ptr<T>(grad_weight), ptr<T>(grad_bias));
  });
}

}  // namespace

static const native::RegisterKernel reg_layer_norm(native::layer_norm_stub, kCPU,
                                                   &layer_norm_kernel);
static const native::RegisterKernel reg_layer_norm_backward(native::layer_norm_backward_stub, kCPU,
                                                            &layer_norm_backward_kernel);

}  // namespace cpu
}  // namespace loom
