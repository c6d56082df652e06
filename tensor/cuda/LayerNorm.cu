// Layer norm on CUDA with the CPU kernels' formulas (tensor/cpu/LayerNorm.cpp,
// the oracle): statistics in double, values centred as e = (x - mean) - dm
// (dm the stored mean's rounding error, tensor/cpu/NormStats.h),
// y = e * rstd * w + b, and
//   dx = rstd * w * dy + b1 * e + c0,
//   b1 = -rstd^3 * B / N,  c0 = -rstd * A / N,
//   A = sum_j w dy,  B = sum_j w dy e.
//
// Rows (forward, and dx / dm in the backward): one warp per row up to
// kNormWarpRowLimit values, the whole block beyond (NormReduce.cuh).  The
// group strides over its row, reads it again from cache, and writes it.
//
// grad_weight / grad_bias are column sums over the M rows, done in two
// deterministic steps: blocks of 32 columns x 8 row lanes sum one chunk of
// rows each (reads of 32 neighbouring columns coalesce) into (chunks, N)
// double partials in `scratch`; then one thread per column adds its chunks in
// order.  They need each row's dm, which the row kernel leaves in scratch.
// Grid-stride loops keep every grid within 65535 blocks; loop bounds are
// uniform across a block, so every __syncthreads is reached by all.
#include <cuda_runtime.h>

#include <algorithm>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/LayerNorm.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/NormReduce.cuh"

namespace loom {
namespace cuda {
namespace {

constexpr int kColumns = 32;        // columns per block of the parameter sums
constexpr int kRowLanes = 8;        // row lanes per block of the parameter sums
constexpr int64_t kMaxChunks = 64;  // most row chunks of the parameter sums

// Row chunks of the parameter sums: about 64 rows each, at most kMaxChunks.
int64_t backward_chunks(int64_t M) {
  return std::max<int64_t>(1, std::min<int64_t>(kMaxChunks, M / 64));
}

// x, y: (M, N) rows; mean, rstd: (M).
template <typename T>
__global__ void forward_rows(const T* __restrict__ x, const T* weight, const T* bias, int64_t M,
                             int64_t N, double eps, T* __restrict__ y, T* mean, T* rstd,
                             int group) {
  __shared__ double buf[kNormThreads / 32];
  const int lane = threadIdx.x % group;
  const int groups = kNormThreads / group;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * groups; base < M;
       base += static_cast<int64_t>(gridDim.x) * groups) {
    const int64_t row = base + threadIdx.x / group;
    const bool valid = row < M;
    const T* xr = x + (valid ? row : 0) * N;
    const NormMoments s = norm_row_moments(xr, N, valid, lane, group, eps, buf);
    if (!valid) continue;
    const T m = static_cast<T>(s.mean), r = static_cast<T>(s.rstd);
    const T dm = static_cast<T>(s.mean - static_cast<double>(m));
    if (lane == 0) {
      mean[row] = m;
      rstd[row] = r;
    }
    T* yr = y + row * N;
    for (int64_t j = lane; j < N; j += group) {
      T v = ((xr[j] - m) - dm) * r;
      if (weight) v = v * weight[j];
      if (bias) v = v + bias[j];
      yr[j] = v;
    }
  }
}

// Per row its dm (into row_delta when given) and, when dx is given, the row
// of dx (see the note at the top).
template <typename T>
__global__ void backward_rows(const T* __restrict__ dy, const T* __restrict__ x, const T* mean,
                              const T* rstd, const T* weight, int64_t M, int64_t N,
                              T* __restrict__ dx, double* row_delta, int group) {
  __shared__ double buf[kNormThreads / 32];
  const int lane = threadIdx.x % group;
  const int groups = kNormThreads / group;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * groups; base < M;
       base += static_cast<int64_t>(gridDim.x) * groups) {
    const int64_t row = base + threadIdx.x / group;
    const bool valid = row < M;
    const int64_t off = (valid ? row : 0) * N;
    const T m = mean[valid ? row : 0];
    double S = 0, A = 0, B = 0;
    if (valid)
      for (int64_t j = lane; j < N; j += group) {
        const double xm = static_cast<double>(x[off + j] - m);
        S += xm;
        if (dx) {
          const double g = weight
                               ? static_cast<double>(dy[off + j]) * static_cast<double>(weight[j])
                               : static_cast<double>(dy[off + j]);
          A += g;
          B += g * xm;
        }
      }
    S = norm_group_sum(S, buf, group);
    if (dx) {  // uniform across the block
      A = norm_group_sum(A, buf, group);
      B = norm_group_sum(B, buf, group);
    }
    if (!valid) continue;
    const double delta = N > 0 ? S / static_cast<double>(N) : 0.0;
    if (row_delta && lane == 0) row_delta[row] = delta;
    if (!dx) continue;
    B -= delta * A;  // sum g (x - mean) -> sum g e
    const T r = rstd[row];
    const double rd = static_cast<double>(r), n = static_cast<double>(N);
    const T c0 = static_cast<T>(-rd * A / n);
    const T b1 = static_cast<T>(-rd * rd * rd * B / n);
    const T dm = static_cast<T>(delta);
    for (int64_t j = lane; j < N; j += group) {
      const T a = weight ? r * weight[j] : r;
      dx[off + j] = a * dy[off + j] + b1 * ((x[off + j] - m) - dm) + c0;
    }
  }
}

// part_w, part_b: (chunks, N); chunk blockIdx.y covers rows
// [chunk * rows_per_chunk, + rows_per_chunk).
template <typename T>
__global__ void param_partials(const T* __restrict__ dy, const T* __restrict__ x, const T* mean,
                               const T* rstd, const double* row_delta, int64_t M, int64_t N,
                               int64_t rows_per_chunk, double* part_w, double* part_b) {
  __shared__ double sw[kRowLanes][kColumns + 1];
  __shared__ double sb[kRowLanes][kColumns + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * rows_per_chunk;
  const int64_t r1 = min(M, r0 + rows_per_chunk);
  const int64_t tiles = (N + kColumns - 1) / kColumns;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t j = tile * kColumns + tx;
    double aw = 0, ab = 0;
    if (j < N)
      for (int64_t i = r0 + ty; i < r1; i += kRowLanes) {
        const T g = dy[i * N + j];
        const T e = (x[i * N + j] - mean[i]) - static_cast<T>(row_delta[i]);
        aw += static_cast<double>(g) * static_cast<double>(e * rstd[i]);
        ab += static_cast<double>(g);
      }
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && j < N) {
      double tw = 0, tb = 0;
      for (int k = 0; k < kRowLanes; ++k) {
        tw += sw[k][tx];
        tb += sb[k][tx];
      }
      part_w[chunk * N + j] = tw;
      part_b[chunk * N + j] = tb;
    }
    __syncthreads();  // sw / sb are rewritten by the next tile
  }
}

template <typename T>
__global__ void param_totals(const double* part_w, const double* part_b, int64_t chunks, int64_t N,
                             T* dw, T* db) {
  LOOM_CUDA_GRID_STRIDE(j, N) {
    double tw = 0, tb = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      tw += part_w[k * N + j];
      tb += part_b[k * N + j];
    }
    if (dw) dw[j] = static_cast<T>(tw);
    if (db) db[j] = static_cast<T>(tb);
  }
}

}  // namespace

void layer_norm_forward(DType dtype, const void* x, const void* weight, const void* bias, int64_t M,
                        int64_t N, double eps, void* y, void* mean, void* rstd, int device,
                        uint64_t stream) {
  if (M == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t s = as_stream(stream);
  dispatch_floating(dtype, "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int group = norm_group_for(N);
    const int64_t rows_per_block = kNormThreads / group;
    forward_rows<T><<<grid_for((M + rows_per_block - 1) / rows_per_block), kNormThreads, 0, s>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias), M, N,
        eps, static_cast<T*>(y), static_cast<T*>(mean), static_cast<T*>(rstd), group);
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

int64_t layer_norm_backward_scratch(int64_t M, int64_t N) { return M + 2 * backward_chunks(M) * N; }

void layer_norm_backward(DType dtype, const void* grad_out, const void* x, const void* mean,
                         const void* rstd, const void* weight, int64_t M, int64_t N,
                         void* grad_input, void* grad_weight, void* grad_bias, double* scratch,
                         int device, uint64_t stream) {
  const bool params = grad_weight || grad_bias;
  if (M == 0 && !params) return;
  DeviceGuard guard(device);
  const cudaStream_t s = as_stream(stream);
  const int64_t chunks = backward_chunks(M);
  double* row_delta = params ? scratch : nullptr;           // (M)
  double* part_w = params ? scratch + M : nullptr;          // (chunks, N)
  double* part_b = params ? part_w + chunks * N : nullptr;  // (chunks, N)
  dispatch_floating(dtype, "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* dy = static_cast<const T*>(grad_out);
    const T* xp = static_cast<const T*>(x);
    const T* mp = static_cast<const T*>(mean);
    const T* rp = static_cast<const T*>(rstd);
    if (M > 0) {
      const int group = norm_group_for(N);
      const int64_t rows_per_block = kNormThreads / group;
      backward_rows<T><<<grid_for((M + rows_per_block - 1) / rows_per_block), kNormThreads, 0, s>>>(
          dy, xp, mp, rp, static_cast<const T*>(weight), M, N, static_cast<T*>(grad_input),
          row_delta, group);
    }
    if (params && N > 0) {
      const int64_t rows_per_chunk = (M + chunks - 1) / chunks;
      const dim3 grid(grid_for((N + kColumns - 1) / kColumns), static_cast<unsigned>(chunks));
      param_partials<T><<<grid, dim3(kColumns, kRowLanes), 0, s>>>(dy, xp, mp, rp, row_delta, M, N,
                                                                   rows_per_chunk, part_w, part_b);
      param_totals<T><<<blocks_for(N, kNormThreads), kNormThreads, 0, s>>>(
          part_w, part_b, chunks, N, static_cast<T*>(grad_weight), static_cast<T*>(grad_bias));
    }
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda
}  // namespace loom
