// Group norm on CUDA with the CPU kernels' formulas (tensor/cpu/GroupNorm.cpp,
// the oracle).  Values are centred as e = (x - mean) - dm, dm the stored
// mean's rounding error (tensor/cpu/NormStats.h).  A group (n, g) is one
// contiguous run of L = D * HxW values, so the forward is layer norm's row
// kernel over N * G rows of L, with the per-channel affine
// y = e * (rstd * w[c]) + b[c].
//
// Backward, four small steps (scratch in double, see GroupNorm.h):
//   1. per (n, c), a warp or block over its HxW values:
//        sum_dy = sum dy,  sum_dy_xmu = sum dy (x - mean),  sum_xmu = sum (x - mean)
//   2. per (n, g), one thread over the group's D channels:
//        dm = sum_c sum_xmu / count,  sum_dy_xmu -= dm * sum_dy  (now sum dy e),
//        A = sum w[c] sum_dy,  B = sum w[c] sum_dy_xmu,
//        b1 = -rstd^3 B / count,  c0 = -rstd A / count   (count = D * HxW)
//   3. per element: dx = rstd * w[c] * dy + b1 * e + c0
//   4. per channel, over n in order:
//        dw[c] = sum_n sum_dy_xmu[n, c] * rstd[n, g],  db[c] = sum_n sum_dy[n, c]
// Every sum has a fixed order, so results are deterministic.
#include <cuda_runtime.h>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/GroupNorm.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/NormReduce.cuh"

namespace loom {
namespace cuda {
namespace {

// x, y: (N * G, L) rows; mean, rstd: (N * G).
template <typename T>
__global__ void forward_groups(const T* __restrict__ x, const T* weight, const T* bias,
                               int64_t rows, int64_t D, int64_t HxW, int64_t G, double eps,
                               T* __restrict__ y, T* mean, T* rstd, int group) {
  __shared__ double buf[kNormThreads / 32];
  const int lane = threadIdx.x % group;
  const int groups = kNormThreads / group;
  const int64_t L = D * HxW;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * groups; base < rows;
       base += static_cast<int64_t>(gridDim.x) * groups) {
    const int64_t row = base + threadIdx.x / group;
    const bool valid = row < rows;
    const T* xr = x + (valid ? row : 0) * L;
    const NormMoments s = norm_row_moments(xr, L, valid, lane, group, eps, buf);
    if (!valid) continue;
    const T m = static_cast<T>(s.mean), r = static_cast<T>(s.rstd);
    const T dm = static_cast<T>(s.mean - static_cast<double>(m));
    if (lane == 0) {
      mean[row] = m;
      rstd[row] = r;
    }
    const int64_t first_channel = (row % G) * D;
    T* yr = y + row * L;
    for (int64_t j = lane; j < L; j += group) {
      const int64_t c = first_channel + j / HxW;
      const T a = weight ? r * weight[c] : r;
      const T shift = bias ? bias[c] : T(0);
      yr[j] = ((xr[j] - m) - dm) * a + shift;
    }
  }
}

// Step 1: rows (n, c) of HxW values.
template <typename T>
__global__ void channel_sums(const T* __restrict__ dy, const T* __restrict__ x, const T* mean,
                             int64_t rows, int64_t C, int64_t D, int64_t HxW, int64_t G,
                             double* sum_dy, double* sum_dy_xmu, double* sum_xmu, int group) {
  __shared__ double buf[kNormThreads / 32];
  const int lane = threadIdx.x % group;
  const int groups = kNormThreads / group;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * groups; base < rows;
       base += static_cast<int64_t>(gridDim.x) * groups) {
    const int64_t row = base + threadIdx.x / group;  // n * C + c
    const bool valid = row < rows;
    const int64_t r = valid ? row : 0;
    const T m = mean[(r / C) * G + (r % C) / D];
    const int64_t off = r * HxW;
    double s1 = 0, s2 = 0, s3 = 0;
    if (valid)
      for (int64_t i = lane; i < HxW; i += group) {
        const double g = static_cast<double>(dy[off + i]);
        const double xm = static_cast<double>(x[off + i] - m);
        s1 += g;
        s2 += g * xm;
        s3 += xm;
      }
    s1 = norm_group_sum(s1, buf, group);
    s2 = norm_group_sum(s2, buf, group);
    s3 = norm_group_sum(s3, buf, group);
    if (valid && lane == 0) {
      sum_dy[row] = s1;
      sum_dy_xmu[row] = s2;
      sum_xmu[row] = s3;
    }
  }
}

// Step 2: coef_dm, coef_b1, coef_c0 (N * G), rounded to T as the CPU rounds
// them; sum_dy_xmu corrected in place to sum dy e.
template <typename T>
__global__ void group_coefficients(const double* sum_dy, double* sum_dy_xmu, const double* sum_xmu,
                                   const T* rstd, const T* weight, int64_t N, int64_t C, int64_t D,
                                   int64_t HxW, int64_t G, double* coef_dm, double* coef_b1,
                                   double* coef_c0) {
  const double count = static_cast<double>(D * HxW);
  LOOM_CUDA_GRID_STRIDE(u, N * G) {
    const int64_t n = u / G, g = u % G;
    double S = 0;
    for (int64_t d = 0; d < D; ++d) S += sum_xmu[n * C + g * D + d];
    const double delta = count > 0 ? S / count : 0.0;
    double A = 0, B = 0;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t c = g * D + d;
      sum_dy_xmu[n * C + c] -= delta * sum_dy[n * C + c];
      const double wc = weight ? static_cast<double>(weight[c]) : 1.0;
      A += wc * sum_dy[n * C + c];
      B += wc * sum_dy_xmu[n * C + c];
    }
    const double rd = static_cast<double>(rstd[u]);
    coef_dm[u] = static_cast<double>(static_cast<T>(delta));
    coef_b1[u] = static_cast<double>(static_cast<T>(-rd * rd * rd * B / count));
    coef_c0[u] = static_cast<double>(static_cast<T>(-rd * A / count));
  }
}

// Step 3: dx (N, C, HxW).
template <typename T>
__global__ void grad_input_elements(const T* __restrict__ dy, const T* __restrict__ x,
                                    const T* mean, const T* rstd, const T* weight, int64_t total,
                                    int64_t C, int64_t D, int64_t HxW, int64_t G,
                                    const double* coef_dm, const double* coef_b1,
                                    const double* coef_c0, T* __restrict__ dx) {
  LOOM_CUDA_GRID_STRIDE(k, total) {
    const int64_t nc = k / HxW, c = nc % C;
    const int64_t u = (nc / C) * G + c / D;
    const T r = rstd[u], m = mean[u];
    const T a = weight ? r * weight[c] : r;
    const T e = (x[k] - m) - static_cast<T>(coef_dm[u]);
    dx[k] = a * dy[k] + static_cast<T>(coef_b1[u]) * e + static_cast<T>(coef_c0[u]);
  }
}

// Step 4: dw, db (C).
template <typename T>
__global__ void param_sums(const double* sum_dy, const double* sum_dy_xmu, const T* rstd, int64_t N,
                           int64_t C, int64_t D, int64_t G, T* dw, T* db) {
  LOOM_CUDA_GRID_STRIDE(c, C) {
    const int64_t g = c / D;
    double sw = 0, sb = 0;
    for (int64_t n = 0; n < N; ++n) {
      sw += sum_dy_xmu[n * C + c] * static_cast<double>(rstd[n * G + g]);
      sb += sum_dy[n * C + c];
    }
    if (dw) dw[c] = static_cast<T>(sw);
    if (db) db[c] = static_cast<T>(sb);
  }
}

}  // namespace

void group_norm_forward(DType dtype, const void* x, const void* weight, const void* bias, int64_t N,
                        int64_t C, int64_t HxW, int64_t G, double eps, void* y, void* mean,
                        void* rstd, int device, uint64_t stream) {
  const int64_t rows = N * G;
  if (rows == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t s = as_stream(stream);
  dispatch_floating(dtype, "group_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t D = C / G;
    const int group = norm_group_for(D * HxW);
    const int64_t rows_per_block = kNormThreads / group;
    forward_groups<T>
        <<<grid_for((rows + rows_per_block - 1) / rows_per_block), kNormThreads, 0, s>>>(
            static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias),
            rows, D, HxW, G, eps, static_cast<T*>(y), static_cast<T*>(mean), static_cast<T*>(rstd),
            group);
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

int64_t group_norm_backward_scratch(int64_t N, int64_t C, int64_t G) {
  return 3 * N * C + 3 * N * G;
}

void group_norm_backward(DType dtype, const void* grad_out, const void* x, const void* mean,
                         const void* rstd, const void* weight, int64_t N, int64_t C, int64_t HxW,
                         int64_t G, void* grad_input, void* grad_weight, void* grad_bias,
                         double* scratch, int device, uint64_t stream) {
  DeviceGuard guard(device);
  const cudaStream_t s = as_stream(stream);
  double* sum_dy = scratch;              // (N, C)
  double* sum_dy_xmu = sum_dy + N * C;   // (N, C)
  double* sum_xmu = sum_dy_xmu + N * C;  // (N, C)
  double* coef_dm = sum_xmu + N * C;     // (N, G)
  double* coef_b1 = coef_dm + N * G;     // (N, G)
  double* coef_c0 = coef_b1 + N * G;     // (N, G)
  dispatch_floating(dtype, "group_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* dy = static_cast<const T*>(grad_out);
    const T* xp = static_cast<const T*>(x);
    const T* mp = static_cast<const T*>(mean);
    const T* rp = static_cast<const T*>(rstd);
    const T* wp = static_cast<const T*>(weight);
    const int64_t D = C / G;
    const int64_t rows = N * C;
    if (rows > 0) {
      const int group = norm_group_for(HxW);
      const int64_t rows_per_block = kNormThreads / group;
      channel_sums<T>
          <<<grid_for((rows + rows_per_block - 1) / rows_per_block), kNormThreads, 0, s>>>(
              dy, xp, mp, rows, C, D, HxW, G, sum_dy, sum_dy_xmu, sum_xmu, group);
      group_coefficients<T><<<blocks_for(N * G, kNormThreads), kNormThreads, 0, s>>>(
          sum_dy, sum_dy_xmu, sum_xmu, rp, wp, N, C, D, HxW, G, coef_dm, coef_b1, coef_c0);
    }
    if (grad_input && rows * HxW > 0)
      grad_input_elements<T><<<blocks_for(rows * HxW, kNormThreads), kNormThreads, 0, s>>>(
          dy, xp, mp, rp, wp, rows * HxW, C, D, HxW, G, coef_dm, coef_b1, coef_c0,
          static_cast<T*>(grad_input));
    if ((grad_weight || grad_bias) && C > 0)
      param_sums<T><<<blocks_for(C, kNormThreads), kNormThreads, 0, s>>>(
          sum_dy, sum_dy_xmu, rp, N, C, D, G, static_cast<T*>(grad_weight),
          static_cast<T*>(grad_bias));
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda
}  // namespace loom
