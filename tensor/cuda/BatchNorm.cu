// Batch norm on CUDA with loom's own kernels rather than cuDNN's
// (cudnnBatchNormalizationForwardTraining & co.): cuDNN rejects eps below
// CUDNN_BN_MIN_EPSILON, needs weight and bias tensors (loom's are optional),
// and sums in the data type, while the CPU kernels -- the oracle -- sum in
// double and round the mean to T before the variance pass.  Matching them
// exactly is simplest with the same formulas here.
//
// Per pass, the channel's sums are cut into tiles over the batch and the
// spatial run (BatchNormPlan.h), enough to fill every SM: a first kernel sums
// each tile (double accumulators, a warp-shuffle then shared-memory combine
// in a fixed order), a second combines each channel's tiles in order and
// writes the statistics and the affine coefficients (in double, to
// `scratch`), and a third, elementwise kernel applies them to every element:
//   forward   y  = x * a + shift                (a, shift)     scratch (2, C)
//   backward  dx = a * dy + b * (x - mean) + k  (a, b, k)      scratch (3, C)
// followed in scratch by the tiles' partial sums (2, C, splits).  The forward
// statistics come from one pass of shifted sums (BatchNormPlan.h says how
// they give the CPU's two-pass figures); the backward's two sums share one
// pass.  The elementwise kernels find an element's channel with IntDivider
// (no 64-bit division) when every index fits in 31 bits.
// The coefficient formulas are the CPU's (tensor/cpu/Normalization.cpp), in
// BatchNormCoefficients.cuh, shared with the channels-last (NHWC) kernels of
// BatchNormChannelsLast.cu.
//
// Fused as on the CPU (BatchNormShape::relu, ::residual): the forward's
// elementwise pass adds the residual (to the batch-norm value rounded to T,
// as the separate add would see it) and applies the ReLU before it writes;
// the backward's two passes read the fused output y and take dy where
// y > 0, else 0, as ReLU's backward would have masked it.  The results are
// those of the separate ops, with one pass over the activations fewer each
// way (two with the residual).
//
// float16 and bfloat16 activations are read and written as they are, with
// float32 parameters and statistics beside them (P = ParamOf<T>): each value
// is widened in a register and the arithmetic is the float32 kernels', so
// the results are the float32 computation's rounded once -- the same bits
// the native op's old widened path gave, without its float32 copies of the
// input, output and gradients (at ResNet-50 batch 256 several GB a step).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/BatchNorm.h"
#include "tensor/cuda/BatchNormCoefficients.cuh"
#include "tensor/cuda/BatchNormPlan.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/IntDivider.h"
#include "tensor/cuda/Launch.cuh"

namespace loom {
namespace cuda {
namespace {

using native::BatchNormShape;

constexpr int kThreads = kBatchNormThreads;
constexpr int kWarps = kThreads / 32;

// Sums a and b over the block in a fixed order; thread (0, 0) gets the totals.
// sh: 2 * kWarps doubles of shared memory.
__device__ void block_sum2(double& a, double& b, double* sh) {
  for (int off = 16; off > 0; off >>= 1) {
    a += __shfl_down_sync(0xffffffffu, a, off);
    b += __shfl_down_sync(0xffffffffu, b, off);
  }
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
  if (t % 32 == 0) {
    sh[t / 32] = a;
    sh[kWarps + t / 32] = b;
  }
  __syncthreads();
  if (t == 0) {
    a = 0;
    b = 0;
    for (int w = 0; w < kWarps; ++w) {
      a += sh[w];
      b += sh[kWarps + w];
    }
  }
  __syncthreads();  // sh is rewritten by the next channel
}

// f(offset) for every element of tile `tile` of channel c: y threads over the
// rows, x threads along each row's contiguous run.
template <typename F>
__device__ __forceinline__ void walk_tile(const BatchNormTile& tile, const BatchNormShape& s,
                                          int64_t c, F&& f) {
  for (int64_t n = tile.r0 + threadIdx.y; n < tile.r1; n += blockDim.y) {
    const int64_t row = (n * s.channels + c) * s.spatial;
    for (int64_t i = tile.s0 + threadIdx.x; i < tile.s1; i += blockDim.x) f(row + i);
  }
}

// Block (tile, c): partial[0][c][tile] = sum (x - K), partial[1][c][tile] =
// sum (x - K)^2 with K = the channel's first value.
template <typename T>
__global__ void bn_stats_partial(const T* __restrict__ x, BatchNormShape s, BatchNormPlan p,
                                 double* partial) {
  __shared__ double sh[2 * kWarps];
  const int64_t splits = p.splits(), C = s.channels;
  const BatchNormTile tile = batch_norm_tile(p, s, blockIdx.x);
  for (int64_t c = blockIdx.y; c < C; c += gridDim.y) {
    const double shift = static_cast<double>(x[c * s.spatial]);
    double s1 = 0, s2 = 0;
    walk_tile(tile, s, c, [&](int64_t off) {
      const double d = static_cast<double>(x[off]) - shift;
      s1 += d;
      s2 += d * d;
    });
    block_sum2(s1, s2, sh);
    if (threadIdx.x == 0 && threadIdx.y == 0) {
      partial[c * splits + blockIdx.x] = s1;
      partial[(C + c) * splits + blockIdx.x] = s2;
    }
  }
}

// One thread per channel: the tiles' sums in order, then the statistics
// (BatchNormCoefficients.cuh).
template <typename T, typename P = ParamOf<T>>
__global__ void bn_stats_finish(const T* __restrict__ x, BatchNormShape s, int64_t splits,
                                const double* partial, const P* weight, const P* bias,
                                double eps, P* running_mean, P* running_var, double momentum,
                                P* save_mean, P* save_invstd, double* coef) {
  const int64_t C = s.channels;
  LOOM_CUDA_GRID_STRIDE(c, C) {
    double s1 = 0, s2 = 0;
    for (int64_t t = 0; t < splits; ++t) {
      s1 += partial[c * splits + t];
      s2 += partial[(C + c) * splits + t];
    }
    bn_channel_stats<P>(c, C, s1, s2, static_cast<double>(x[c * s.spatial]),
                        static_cast<double>(s.batch * s.spatial), weight, bias, eps,
                        running_mean, running_var, momentum, save_mean, save_invstd, coef);
  }
}

// Evaluation statistics from the running ones, one thread per channel.
template <typename P>
__global__ void bn_eval_stats(int64_t C, const P* weight, const P* bias, double eps,
                              const P* running_mean, const P* running_var, P* save_mean,
                              P* save_invstd, double* coef) {
  LOOM_CUDA_GRID_STRIDE(c, C) {
    bn_channel_eval_stats<P>(c, C, weight, bias, eps, running_mean, running_var, save_mean,
                             save_invstd, coef);
  }
}

// The channel of flat index j of an (N, C, S) tensor.
struct ChannelOf {
  IntDivider by_spatial, by_channels;
  int64_t C, S;
  template <bool kFast>
  __device__ __forceinline__ int64_t at(int64_t j) const {
    if constexpr (kFast) return by_channels.mod(by_spatial.div(static_cast<uint32_t>(j)));
    else return (j / S) % C;
  }
};

// y (N, C, S) = x * a[c] + shift[c], in P; then, when fused, + r (the
// residual, with the batch-norm value rounded to T first, as the separate
// add reads it) and max(., 0) (NaN stays NaN, as ReLU's).
template <typename T, bool kFast, typename P = ParamOf<T>>
__global__ void bn_apply(const T* __restrict__ x, const T* __restrict__ r, bool relu,
                         T* __restrict__ y, const double* coef, ChannelOf ch, int64_t total) {
  LOOM_CUDA_GRID_STRIDE(j, total) {
    const int64_t c = ch.template at<kFast>(j);
    P v = static_cast<P>(x[j]) * static_cast<P>(coef[c]) + static_cast<P>(coef[ch.C + c]);
    if (r != nullptr) v = static_cast<P>(static_cast<T>(v)) + static_cast<P>(r[j]);
    if (relu && v < P(0)) v = P(0);
    y[j] = static_cast<T>(v);
  }
}

// dy at `off` through the fused ReLU's mask of y (BatchNormCoefficients.cuh);
// dy itself without a fused ReLU (y null).
template <typename T, typename P>
__device__ __forceinline__ P masked_grad(const T* __restrict__ dy, const T* __restrict__ y,
                                         int64_t off) {
  return bn_masked_grad<T, P>(dy[off], y != nullptr ? y[off] : dy[off], y != nullptr);
}

// Block (tile, c): partial[0][c][tile] = sum dy, partial[1][c][tile] =
// sum dy (x - mean).
template <typename T, typename P = ParamOf<T>>
__global__ void bn_backward_partial(const T* __restrict__ dy, const T* __restrict__ y,
                                    const T* __restrict__ x, BatchNormShape s, BatchNormPlan p,
                                    const P* mean, double* partial) {
  __shared__ double sh[2 * kWarps];
  const int64_t splits = p.splits(), C = s.channels;
  const BatchNormTile tile = batch_norm_tile(p, s, blockIdx.x);
  for (int64_t c = blockIdx.y; c < C; c += gridDim.y) {
    const P m = mean[c];
    double sum_dy = 0, sum_dy_xmu = 0;
    walk_tile(tile, s, c, [&](int64_t off) {
      const double g = static_cast<double>(masked_grad<T, P>(dy, y, off));
      sum_dy += g;
      sum_dy_xmu += g * static_cast<double>(static_cast<P>(x[off]) - m);
    });
    block_sum2(sum_dy, sum_dy_xmu, sh);
    if (threadIdx.x == 0 && threadIdx.y == 0) {
      partial[c * splits + blockIdx.x] = sum_dy;
      partial[(C + c) * splits + blockIdx.x] = sum_dy_xmu;
    }
  }
}

// One thread per channel: grad_weight/grad_bias and the dx coefficients.
template <typename P>
__global__ void bn_backward_finish(BatchNormShape s, int64_t splits, const double* partial,
                                   const P* invstd, const P* weight, bool training,
                                   P* grad_weight, P* grad_bias, double* coef) {
  const int64_t C = s.channels;
  const double count = static_cast<double>(s.batch * s.spatial);
  LOOM_CUDA_GRID_STRIDE(c, C) {
    double sum_dy = 0, sum_dy_xmu = 0;
    for (int64_t t = 0; t < splits; ++t) {
      sum_dy += partial[c * splits + t];
      sum_dy_xmu += partial[(C + c) * splits + t];
    }
    bn_channel_backward<P>(c, C, sum_dy, sum_dy_xmu, count, invstd, weight, training,
                           grad_weight, grad_bias, coef);
  }
}

// dx (N, C, S) = a[c] * dy + b[c] * (x - mean[c]) + k[c], in P.  x - mean
// first, as PyTorch's and the CPU's: b * x and b * mean are each far larger
// than dx where a channel's mean dwarfs its spread.
template <typename T, bool kFast, typename P = ParamOf<T>>
__global__ void bn_backward_apply(const T* __restrict__ dy, const T* __restrict__ y,
                                  const T* __restrict__ x, const P* __restrict__ mean,
                                  T* __restrict__ dx, const double* coef, ChannelOf ch,
                                  int64_t total) {
  LOOM_CUDA_GRID_STRIDE(j, total) {
    const int64_t c = ch.template at<kFast>(j);
    dx[j] = static_cast<T>(static_cast<P>(coef[c]) * masked_grad<T, P>(dy, y, j) +
                           static_cast<P>(coef[ch.C + c]) * (static_cast<P>(x[j]) - mean[c]) +
                           static_cast<P>(coef[2 * ch.C + c]));
  }
}

ChannelOf channel_of(const BatchNormShape& s) {
  ChannelOf ch;
  ch.C = s.channels;
  ch.S = s.spatial;
  if (fits_int_divider(s.batch * s.channels * s.spatial)) {
    ch.by_spatial = IntDivider(static_cast<uint32_t>(std::max<int64_t>(s.spatial, 1)));
    ch.by_channels = IntDivider(static_cast<uint32_t>(std::max<int64_t>(s.channels, 1)));
  }
  return ch;
}

dim3 partial_grid(const BatchNormPlan& p, int64_t C) {
  return dim3(static_cast<unsigned>(p.splits()), static_cast<unsigned>(grid_for(C)));
}

template <typename T>
void forward(const BatchNormShape& s, const void* x, const void* residual, const void* weight,
             const void* bias, void* running_mean, void* running_var, bool training,
             double momentum, double eps, void* y, void* save_mean, void* save_invstd,
             double* scratch, int device, cudaStream_t stream) {
  using P = ParamOf<T>;
  const int64_t C = s.channels, S = s.spatial, total = s.batch * C * S;
  if (C == 0) return;
  const P* w = static_cast<const P*>(weight);
  const P* b = static_cast<const P*>(bias);
  const T* xt = static_cast<const T*>(x);
  if (training) {
    const BatchNormPlan p = plan_batch_norm(s, multiprocessors(device));
    double* partial = scratch + 2 * C;
    const dim3 block(p.threads_x, p.threads_y);
    bn_stats_partial<T><<<partial_grid(p, C), block, 0, stream>>>(xt, s, p, partial);
    LOOM_CUDA_CHECK(cudaGetLastError());
    bn_stats_finish<T><<<blocks_for(C, kThreads), kThreads, 0, stream>>>(
        xt, s, p.splits(), partial, w, b, eps, static_cast<P*>(running_mean),
        static_cast<P*>(running_var), momentum, static_cast<P*>(save_mean),
        static_cast<P*>(save_invstd), scratch);
  } else {
    bn_eval_stats<P><<<blocks_for(C, kThreads), kThreads, 0, stream>>>(
        C, w, b, eps, static_cast<const P*>(running_mean), static_cast<const P*>(running_var),
        static_cast<P*>(save_mean), static_cast<P*>(save_invstd), scratch);
  }
  LOOM_CUDA_CHECK(cudaGetLastError());
  if (total == 0) return;
  const ChannelOf ch = channel_of(s);
  const T* r = s.residual ? static_cast<const T*>(residual) : nullptr;
  if (fits_int_divider(total))
    bn_apply<T, true><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(
        xt, r, s.relu, static_cast<T*>(y), scratch, ch, total);
  else
    bn_apply<T, false><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(
        xt, r, s.relu, static_cast<T*>(y), scratch, ch, total);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void backward(const BatchNormShape& s, const void* grad_out, const void* relu_out,
              const void* x, const void* mean,
              const void* invstd, const void* weight, bool training, void* grad_input,
              void* grad_weight, void* grad_bias, double* scratch, int device,
              cudaStream_t stream) {
  using P = ParamOf<T>;
  const int64_t C = s.channels, S = s.spatial, total = s.batch * C * S;
  if (C == 0) return;
  const T* dy = static_cast<const T*>(grad_out);
  const T* yt = s.relu ? static_cast<const T*>(relu_out) : nullptr;
  const T* xt = static_cast<const T*>(x);
  const BatchNormPlan p = plan_batch_norm(s, multiprocessors(device));
  double* partial = scratch + 3 * C;
  const dim3 block(p.threads_x, p.threads_y);
  bn_backward_partial<T><<<partial_grid(p, C), block, 0, stream>>>(
      dy, yt, xt, s, p, static_cast<const P*>(mean), partial);
  LOOM_CUDA_CHECK(cudaGetLastError());
  bn_backward_finish<P><<<blocks_for(C, kThreads), kThreads, 0, stream>>>(
      s, p.splits(), partial, static_cast<const P*>(invstd), static_cast<const P*>(weight),
      training, static_cast<P*>(grad_weight), static_cast<P*>(grad_bias), scratch);
  LOOM_CUDA_CHECK(cudaGetLastError());
  if (!grad_input || total == 0) return;
  const ChannelOf ch = channel_of(s);
  T* dx = static_cast<T*>(grad_input);
  if (fits_int_divider(total))
    bn_backward_apply<T, true><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(
        dy, yt, xt, static_cast<const P*>(mean), dx, scratch, ch, total);
  else
    bn_backward_apply<T, false><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(
        dy, yt, xt, static_cast<const P*>(mean), dx, scratch, ch, total);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

int64_t batch_norm_scratch_doubles(const native::BatchNormShape& s, bool backward, int device) {
  const int64_t coefficients = (backward ? 3 : 2) * s.channels;
  return coefficients + 2 * s.channels * plan_batch_norm(s, multiprocessors(device)).splits();
}

void batch_norm_forward(DType dtype, const native::BatchNormShape& s, const void* x,
                        const void* residual, const void* weight, const void* bias,
                        void* running_mean,
                        void* running_var, bool training, double momentum, double eps, void* y,
                        void* save_mean, void* save_invstd, double* scratch, int device,
                        uint64_t stream) {
  DeviceGuard guard(device);
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  dispatch_all_floating(dtype, "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward<T>(s, x, residual, weight, bias, running_mean, running_var, training, momentum, eps,
               y, save_mean, save_invstd, scratch, device, st);
  });
}

void batch_norm_backward(DType dtype, const native::BatchNormShape& s, const void* grad_out,
                         const void* relu_out, const void* x, const void* mean,
                         const void* invstd, const void* weight,
                         bool training, void* grad_input, void* grad_weight, void* grad_bias,
                         double* scratch, int device, uint64_t stream) {
  DeviceGuard guard(device);
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  dispatch_all_floating(dtype, "batch_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward<T>(s, grad_out, relu_out, x, mean, invstd, weight, training, grad_input,
                grad_weight, grad_bias, scratch, device, st);
  });
}

}  // namespace cuda
}  // namespace loom
