// Batch norm on CUDA for channels-last (NHWC) inputs: the values are an
// M x C row-major matrix (M = N * H * W rows of one pixel's C channels) and
// every statistic is a column sum, so the kernels walk rows with the
// channel as the fast index -- threads side by side take neighbouring
// channels, four at a time as one aligned vector where C and the pointers
// allow -- instead of the NCHW kernels' contiguous run per channel
// (BatchNorm.cu).  Channels-last training (cuDNN's NHWC tensor-core
// convolutions around it) then needs no transposes.
//
// The passes and their arithmetic are the NCHW kernels' (the CPU kernels'
// formulas, BatchNormCoefficients.cuh), on the grid of
// BatchNormChannelsLastPlan.h:
//   forward   bnl_stats_partial   each block sums d = x - K and d^2 (K the
//                                 channel's first value) in double over its
//                                 rows of one channel tile -> scratch
//             bnl_stats_finish    one thread per channel adds the row
//                                 splits' sums in order: statistics, running
//                                 statistics, y = x * a + shift's a, shift
//             bnl_apply           y, the residual added and the ReLU applied
//                                 when fused
//   backward  bnl_backward_partial  sum dy and sum dy (x - mean), dy through
//                                 the fused ReLU's mask, in double
//             bnl_backward_finish grad_weight, grad_bias, and a, b, k of
//                                 dx = a * dy + b * (x - mean) + k
//             bnl_backward_apply  dx
// Scratch (doubles): the coefficients (2 or 3, C), then the partial sums
// (2, row_splits, C), laid out so the finishing threads read them coalesced.
// Every sum is formed in a fixed order, so results are deterministic; they
// match the NCHW kernels' to the rounding of double sums taken in another
// order, and the CPU's within float32 rounding (its channels-last kernels
// add float32 blocks of 128 rows).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/BatchNormChannelsLast.h"
#include "tensor/cuda/BatchNormChannelsLastPlan.h"
#include "tensor/cuda/BatchNormCoefficients.cuh"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/VectorAccess.cuh"

namespace loom {
namespace cuda {
namespace {

using native::BatchNormShape;
using Plan = BatchNormChannelsLastPlan;

constexpr int kThreads = kBatchNormThreads;
constexpr int kVec = kBatchNormChannelsLastVec;

// This thread's first channel in channel tile `tile`.
template <int V>
__device__ __forceinline__ int64_t first_channel(const Plan& p, int64_t tile) {
  return tile * p.tile_channels + static_cast<int64_t>(threadIdx.x) * V;
}

// Rows [r0, r1) of this block's split.
__device__ __forceinline__ void split_rows(const Plan& p, int64_t M, int64_t& r0, int64_t& r1) {
  r0 = static_cast<int64_t>(blockIdx.x) * p.rows_per_split;
  r1 = r0 + p.rows_per_split < M ? r0 + p.rows_per_split : M;
}

// The block's per-column sums a and b (each thread's V columns, summed down
// its rows) added over the threads_y rows of threads in order, in shared
// memory sh (2 * kThreads * kVec doubles), and written for tile `tile` as
// partial[split][c] and partial[row_splits + split][c].
template <int V>
__device__ void write_block_sums(const double (&a)[V], const double (&b)[V], double* sh,
                                 const Plan& p, int64_t tile, int64_t C, double* partial) {
  const int64_t width = p.tile_channels;  // blockDim.x * V
  double* sa = sh;
  double* sb = sh + kThreads * kVec;
  const int64_t col = static_cast<int64_t>(threadIdx.x) * V;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    sa[threadIdx.y * width + col + j] = a[j];
    sb[threadIdx.y * width + col + j] = b[j];
  }
  __syncthreads();
  const int64_t t = threadIdx.y * blockDim.x + threadIdx.x;
  const int64_t c0 = tile * width, split = blockIdx.x;
  for (int64_t k = t; k < width && c0 + k < C; k += kThreads) {
    double ta = 0, tb = 0;
    for (unsigned y = 0; y < blockDim.y; ++y) {
      ta += sa[y * width + k];
      tb += sb[y * width + k];
    }
    partial[split * C + c0 + k] = ta;
    partial[(p.row_splits + split) * C + c0 + k] = tb;
  }
  __syncthreads();  // sh is rewritten for the next tile
}

// Block (split, tile): per column c, sum (x - K) and sum (x - K)^2 over the
// split's rows, K = x[0][c] (the channel's first value).
template <typename T, int V>
__global__ void bnl_stats_partial(const T* __restrict__ x, int64_t M, int64_t C, Plan p,
                                  double* __restrict__ partial) {
  __shared__ double sh[2 * kThreads * kVec];
  int64_t r0, r1;
  split_rows(p, M, r0, r1);
  for (int64_t tile = blockIdx.y; tile < p.channel_tiles; tile += gridDim.y) {
    const int64_t c = first_channel<V>(p, tile);
    double s1[V] = {}, s2[V] = {};
    if (c < C && M > 0) {
      const Vec<T, V> first = load_vec<T, V>(x + c);
      double shift[V];
#pragma unroll
      for (int j = 0; j < V; ++j) shift[j] = static_cast<double>(first.v[j]);
#pragma unroll 4
      for (int64_t r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
        const Vec<T, V> v = load_vec<T, V>(x + r * C + c);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const double d = static_cast<double>(v.v[j]) - shift[j];
          s1[j] += d;
          s2[j] += d * d;
        }
      }
    }
    write_block_sums<V>(s1, s2, sh, p, tile, C, partial);
  }
}

// One thread per channel: the splits' sums in order, then the statistics.
template <typename T, typename P = ParamOf<T>>
__global__ void bnl_stats_finish(const T* __restrict__ x, int64_t M, int64_t C, int64_t splits,
                                 const double* partial, const P* weight, const P* bias,
                                 double eps, P* running_mean, P* running_var, double momentum,
                                 P* save_mean, P* save_invstd, double* coef) {
  LOOM_CUDA_GRID_STRIDE(c, C) {
    double s1 = 0, s2 = 0;
    for (int64_t t = 0; t < splits; ++t) {
      s1 += partial[t * C + c];
      s2 += partial[(splits + t) * C + c];
    }
    bn_channel_stats<P>(c, C, s1, s2, static_cast<double>(x[c]), static_cast<double>(M), weight,
                        bias, eps, running_mean, running_var, momentum, save_mean, save_invstd,
                        coef);
  }
}

// Evaluation statistics from the running ones, one thread per channel.
template <typename P>
__global__ void bnl_eval_stats(int64_t C, const P* weight, const P* bias, double eps,
                               const P* running_mean, const P* running_var, P* save_mean,
                               P* save_invstd, double* coef) {
  LOOM_CUDA_GRID_STRIDE(c, C) {
    bn_channel_eval_stats<P>(c, C, weight, bias, eps, running_mean, running_var, save_mean,
                             save_invstd, coef);
  }
}

// y (M, C) = x * a[c] + shift[c], in P; then, when fused, + r (the
// residual, with the batch-norm value rounded to T first, as the separate
// add reads it) and max(., 0) (NaN stays NaN, as ReLU's).
template <typename T, int V, typename P = ParamOf<T>>
__global__ void bnl_apply(const T* __restrict__ x, const T* __restrict__ r, bool relu,
                          T* __restrict__ y, const double* __restrict__ coef, int64_t M,
                          int64_t C, Plan p) {
  for (int64_t tile = blockIdx.y; tile < p.channel_tiles; tile += gridDim.y) {
    const int64_t c = first_channel<V>(p, tile);
    if (c >= C) continue;
    P a[V], shift[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      a[j] = static_cast<P>(coef[c + j]);
      shift[j] = static_cast<P>(coef[C + c + j]);
    }
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.y;
    for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; row < M;
         row += stride) {
      const int64_t off = row * C + c;
      const Vec<T, V> xv = load_vec<T, V>(x + off);
      const Vec<T, V> rv = r != nullptr ? load_vec<T, V>(r + off) : xv;
      Vec<T, V> out;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        P v = static_cast<P>(xv.v[j]) * a[j] + shift[j];
        if (r != nullptr) v = static_cast<P>(static_cast<T>(v)) + static_cast<P>(rv.v[j]);
        if (relu && v < P(0)) v = P(0);
        out.v[j] = static_cast<T>(v);
      }
      store_vec<T, V>(y + off, out);
    }
  }
}

// Block (split, tile): per column c, sum dy and sum dy (x - mean[c]) over
// the split's rows, dy through the fused ReLU's mask of y (y null: none).
template <typename T, int V, typename P = ParamOf<T>>
__global__ void bnl_backward_partial(const T* __restrict__ dy, const T* __restrict__ y,
                                     const T* __restrict__ x, int64_t M, int64_t C, Plan p,
                                     const P* __restrict__ mean, double* __restrict__ partial) {
  __shared__ double sh[2 * kThreads * kVec];
  int64_t r0, r1;
  split_rows(p, M, r0, r1);
  const bool relu = y != nullptr;
  for (int64_t tile = blockIdx.y; tile < p.channel_tiles; tile += gridDim.y) {
    const int64_t c = first_channel<V>(p, tile);
    double sum_dy[V] = {}, sum_dy_xmu[V] = {};
    if (c < C) {
      P m[V];
#pragma unroll
      for (int j = 0; j < V; ++j) m[j] = mean[c + j];
#pragma unroll 4
      for (int64_t r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
        const int64_t off = r * C + c;
        const Vec<T, V> g = load_vec<T, V>(dy + off);
        const Vec<T, V> xv = load_vec<T, V>(x + off);
        const Vec<T, V> yv = relu ? load_vec<T, V>(y + off) : g;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const double gd = static_cast<double>(bn_masked_grad<T, P>(g.v[j], yv.v[j], relu));
          sum_dy[j] += gd;
          sum_dy_xmu[j] += gd * static_cast<double>(static_cast<P>(xv.v[j]) - m[j]);
        }
      }
    }
    write_block_sums<V>(sum_dy, sum_dy_xmu, sh, p, tile, C, partial);
  }
}

// One thread per channel: grad_weight/grad_bias and the dx coefficients
// (splits 0: no sums, for evaluation without parameter gradients).
template <typename P>
__global__ void bnl_backward_finish(int64_t M, int64_t C, int64_t splits, const double* partial,
                                    const P* invstd, const P* weight, bool training,
                                    P* grad_weight, P* grad_bias, double* coef) {
  LOOM_CUDA_GRID_STRIDE(c, C) {
    double sum_dy = 0, sum_dy_xmu = 0;
    for (int64_t t = 0; t < splits; ++t) {
      sum_dy += partial[t * C + c];
      sum_dy_xmu += partial[(splits + t) * C + c];
    }
    bn_channel_backward<P>(c, C, sum_dy, sum_dy_xmu, static_cast<double>(M), invstd, weight,
                           training, grad_weight, grad_bias, coef);
  }
}

// dx (M, C) = a[c] * dy + b[c] * (x - mean[c]) + k[c], in P, dy through the
// fused ReLU's mask of y.  x - mean first, as the NCHW kernel (BatchNorm.cu
// says why).
template <typename T, int V, typename P = ParamOf<T>>
__global__ void bnl_backward_apply(const T* __restrict__ dy, const T* __restrict__ y,
                                   const T* __restrict__ x, const P* __restrict__ mean,
                                   T* __restrict__ dx, const double* __restrict__ coef, int64_t M,
                                   int64_t C, Plan p) {
  const bool relu = y != nullptr;
  for (int64_t tile = blockIdx.y; tile < p.channel_tiles; tile += gridDim.y) {
    const int64_t c = first_channel<V>(p, tile);
    if (c >= C) continue;
    P a[V], b[V], k[V], m[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      a[j] = static_cast<P>(coef[c + j]);
      b[j] = static_cast<P>(coef[C + c + j]);
      k[j] = static_cast<P>(coef[2 * C + c + j]);
      m[j] = mean[c + j];
    }
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.y;
    for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; row < M;
         row += stride) {
      const int64_t off = row * C + c;
      const Vec<T, V> g = load_vec<T, V>(dy + off);
      const Vec<T, V> xv = load_vec<T, V>(x + off);
      const Vec<T, V> yv = relu ? load_vec<T, V>(y + off) : g;
      Vec<T, V> out;
#pragma unroll
      for (int j = 0; j < V; ++j)
        out.v[j] = static_cast<T>(a[j] * bn_masked_grad<T, P>(g.v[j], yv.v[j], relu) +
                                  b[j] * (static_cast<P>(xv.v[j]) - m[j]) + k[j]);
      store_vec<T, V>(dx + off, out);
    }
  }
}

// kVec where the shape allows it and every given pointer is aligned to kVec
// elements of T (rows then are too: C is a multiple of kVec); else 1.
template <typename T>
int vec_for(const BatchNormShape& s, std::initializer_list<const void*> pointers) {
  if (batch_norm_channels_last_vec(s) != kVec) return 1;
  for (const void* q : pointers)
    if (q != nullptr && reinterpret_cast<uintptr_t>(q) % (sizeof(T) * kVec) != 0) return 1;
  return kVec;
}

dim3 grid_of(int64_t row_blocks, const Plan& p) {
  return dim3(static_cast<unsigned>(row_blocks),
              static_cast<unsigned>(std::min(p.channel_tiles, kBatchNormMaxGridY)));
}

dim3 block_of(const Plan& p) { return dim3(p.threads_x, p.threads_y); }

template <typename T, int V>
void forward(const BatchNormShape& s, const T* x, const T* residual, const void* weight,
             const void* bias, void* running_mean, void* running_var, bool training,
             double momentum, double eps, T* y, void* save_mean, void* save_invstd,
             double* scratch, int device, cudaStream_t stream) {
  using P = ParamOf<T>;
  const int64_t C = s.channels, M = s.batch * s.spatial;
  const Plan p = plan_batch_norm_channels_last(s, multiprocessors(device), V);
  const P* w = static_cast<const P*>(weight);
  const P* b = static_cast<const P*>(bias);
  if (training) {
    double* partial = scratch + 2 * C;
    bnl_stats_partial<T, V><<<grid_of(p.row_splits, p), block_of(p), 0, stream>>>(x, M, C, p,
                                                                                  partial);
    LOOM_CUDA_CHECK(cudaGetLastError());
    bnl_stats_finish<T><<<blocks_for(C, kThreads), kThreads, 0, stream>>>(
        x, M, C, p.row_splits, partial, w, b, eps, static_cast<P*>(running_mean),
        static_cast<P*>(running_var), momentum, static_cast<P*>(save_mean),
        static_cast<P*>(save_invstd), scratch);
  } else {
    bnl_eval_stats<P><<<blocks_for(C, kThreads), kThreads, 0, stream>>>(
        C, w, b, eps, static_cast<const P*>(running_mean), static_cast<const P*>(running_var),
        static_cast<P*>(save_mean), static_cast<P*>(save_invstd), scratch);
  }
  LOOM_CUDA_CHECK(cudaGetLastError());
  if (M == 0) return;
  bnl_apply<T, V><<<grid_of(p.apply_row_blocks, p), block_of(p), 0, stream>>>(
      x, s.residual ? residual : nullptr, s.relu, y, scratch, M, C, p);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

template <typename T, int V>
void backward(const BatchNormShape& s, const T* grad_out, const T* relu_out, const T* x,
              const void* mean, const void* invstd, const void* weight, bool training,
              T* grad_input, void* grad_weight, void* grad_bias, double* scratch, int device,
              cudaStream_t stream) {
  using P = ParamOf<T>;
  const int64_t C = s.channels, M = s.batch * s.spatial;
  const Plan p = plan_batch_norm_channels_last(s, multiprocessors(device), V);
  const T* y = s.relu ? relu_out : nullptr;
  const P* m = static_cast<const P*>(mean);
  double* partial = scratch + 3 * C;
  // Evaluation's input gradient alone needs no sums (b = k = 0).
  const bool sums = training || grad_weight != nullptr || grad_bias != nullptr;
  if (sums) {
    bnl_backward_partial<T, V><<<grid_of(p.row_splits, p), block_of(p), 0, stream>>>(
        grad_out, y, x, M, C, p, m, partial);
    LOOM_CUDA_CHECK(cudaGetLastError());
  }
  bnl_backward_finish<P><<<blocks_for(C, kThreads), kThreads, 0, stream>>>(
      M, C, sums ? p.row_splits : 0, partial, static_cast<const P*>(invstd),
      static_cast<const P*>(weight), training, static_cast<P*>(grad_weight),
      static_cast<P*>(grad_bias), scratch);
  LOOM_CUDA_CHECK(cudaGetLastError());
  if (grad_input == nullptr || M == 0) return;
  bnl_backward_apply<T, V><<<grid_of(p.apply_row_blocks, p), block_of(p), 0, stream>>>(
      grad_out, y, x, m, grad_input, scratch, M, C, p);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

int64_t batch_norm_channels_last_scratch_doubles(const native::BatchNormShape& s, bool backward,
                                                 int device) {
  const int64_t coefficients = (backward ? 3 : 2) * s.channels;
  return coefficients +
         2 * s.channels * batch_norm_channels_last_max_splits(s, multiprocessors(device));
}

void batch_norm_channels_last_forward(DType dtype, const native::BatchNormShape& s,
                                      const void* x, const void* residual, const void* weight,
                                      const void* bias, void* running_mean, void* running_var,
                                      bool training, double momentum, double eps, void* y,
                                      void* save_mean, void* save_invstd, double* scratch,
                                      int device, uint64_t stream) {
  if (s.channels == 0) return;
  DeviceGuard guard(device);
  cudaStream_t st = as_stream(stream);
  dispatch_all_floating(dtype, "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    const T* rt = s.residual ? static_cast<const T*>(residual) : nullptr;
    T* yt = static_cast<T*>(y);
    if (vec_for<T>(s, {xt, rt, yt}) == kVec)
      forward<T, kVec>(s, xt, rt, weight, bias, running_mean, running_var, training, momentum,
                       eps, yt, save_mean, save_invstd, scratch, device, st);
    else
      forward<T, 1>(s, xt, rt, weight, bias, running_mean, running_var, training, momentum, eps,
                    yt, save_mean, save_invstd, scratch, device, st);
  });
}

void batch_norm_channels_last_backward(DType dtype, const native::BatchNormShape& s,
                                       const void* grad_out, const void* relu_out, const void* x,
                                       const void* mean, const void* invstd, const void* weight,
                                       bool training, void* grad_input, void* grad_weight,
                                       void* grad_bias, double* scratch, int device,
                                       uint64_t stream) {
  if (s.channels == 0) return;
  DeviceGuard guard(device);
  cudaStream_t st = as_stream(stream);
  dispatch_all_floating(dtype, "batch_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* dy = static_cast<const T*>(grad_out);
    const T* yt = s.relu ? static_cast<const T*>(relu_out) : nullptr;
    const T* xt = static_cast<const T*>(x);
    T* dx = static_cast<T*>(grad_input);
    if (vec_for<T>(s, {dy, yt, xt, dx}) == kVec)
      backward<T, kVec>(s, dy, yt, xt, mean, invstd, weight, training, dx, grad_weight,
                        grad_bias, scratch, device, st);
    else
      backward<T, 1>(s, dy, yt, xt, mean, invstd, weight, training, dx, grad_weight, grad_bias,
                     scratch, device, st);
  });
}

}  // namespace cuda
}  // namespace loom
