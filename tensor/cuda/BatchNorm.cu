// Batch norm on CUDA with loom's own kernels rather than cuDNN's
// (cudnnBatchNormalizationForwardTraining & co.): cuDNN rejects eps below
// CUDNN_BN_MIN_EPSILON, needs weight and bias tensors (loom's are optional),
// and sums in the data type, while the CPU kernels -- the oracle -- sum in
// double and round the mean to T before the variance pass.  Matching them
// exactly is simplest with the same formulas here.
//
// Per pass, one kernel reduces each channel (one block per channel,
// grid-stride over channels, double accumulators, a shared-memory tree) and
// writes the per-channel statistics and the affine coefficients (in double,
// to `scratch`); a second, elementwise kernel applies them to every element:
//   forward   y  = x * a + shift                (a, shift)     scratch (2, C)
//   backward  dx = a * dy + b * x + k           (a, b, k)      scratch (3, C)
// The coefficient formulas are the CPU's (tensor/cpu/Normalization.cpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/BatchNorm.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Launch.cuh"

namespace loom {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// The sum of v over the block (every thread gets it).  `sh` holds kThreads doubles.
__device__ double block_sum(double v, double* sh) {
  const int t = threadIdx.x;
  sh[t] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) sh[t] += sh[t + s];
    __syncthreads();
  }
  const double total = sh[0];
  __syncthreads();  // sh is reused by the next call
  return total;
}

// Training statistics, one block per channel c; x (N, C, S).
template <typename T>
__global__ void bn_train_stats(const T* __restrict__ x, int64_t N, int64_t C, int64_t S,
                               const T* weight, const T* bias, double eps, T* running_mean,
                               T* running_var, double momentum, T* save_mean, T* save_invstd,
                               double* coef) {
  __shared__ double sh[kThreads];
  const int64_t count = N * S;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < count; j += kThreads) {
      const int64_t n = j / S, i = j % S;
      sum += static_cast<double>(x[(n * C + c) * S + i]);
    }
    sum = block_sum(sum, sh);
    const T m = static_cast<T>(sum / static_cast<double>(count));  // rounded as on the CPU
    double sq = 0;
    for (int64_t j = threadIdx.x; j < count; j += kThreads) {
      const int64_t n = j / S, i = j % S;
      const double d = static_cast<double>(x[(n * C + c) * S + i] - m);
      sq += d * d;
    }
    sq = block_sum(sq, sh);
    if (threadIdx.x == 0) {
      const double v = sq / static_cast<double>(count);
      const double is = 1.0 / sqrt(v + eps);
      save_mean[c] = m;
      save_invstd[c] = static_cast<T>(is);
      const double w = weight ? static_cast<double>(weight[c]) : 1.0;
      const double b = bias ? static_cast<double>(bias[c]) : 0.0;
      coef[c] = w * is;                                    // a
      coef[C + c] = b - static_cast<double>(m) * w * is;  // shift
      if (running_mean) {
        const T var = static_cast<T>(v);
        const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
        running_mean[c] = static_cast<T>((1 - momentum) * static_cast<double>(running_mean[c]) +
                                         momentum * static_cast<double>(m));
        running_var[c] = static_cast<T>((1 - momentum) * static_cast<double>(running_var[c]) +
                                        momentum * static_cast<double>(var) * unbias);
      }
    }
  }
}

// Evaluation statistics from the running ones, one thread per channel.
template <typename T>
__global__ void bn_eval_stats(int64_t C, const T* weight, const T* bias, double eps,
                              const T* running_mean, const T* running_var, T* save_mean,
                              T* save_invstd, double* coef) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T m = running_mean[c];
    const T is_t = static_cast<T>(1.0 / sqrt(static_cast<double>(running_var[c]) + eps));
    save_mean[c] = m;
    save_invstd[c] = is_t;
    const double is = static_cast<double>(is_t);  // the CPU applies the rounded invstd
    const double w = weight ? static_cast<double>(weight[c]) : 1.0;
    const double b = bias ? static_cast<double>(bias[c]) : 0.0;
    coef[c] = w * is;
    coef[C + c] = b - static_cast<double>(m) * w * is;
  }
}

// y (N, C, S) = x * a[c] + shift[c].
template <typename T>
__global__ void bn_apply(const T* __restrict__ x, T* __restrict__ y, const double* coef,
                         int64_t C, int64_t S, int64_t total) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (j / S) % C;
    y[j] = x[j] * static_cast<T>(coef[c]) + static_cast<T>(coef[C + c]);
  }
}

// Backward sums, one block per channel; writes grad_weight/grad_bias and
// the dx coefficients (a, b, k).
template <typename T>
__global__ void bn_backward_reduce(const T* __restrict__ dy, const T* __restrict__ x, int64_t N,
                                   int64_t C, int64_t S, const T* mean, const T* invstd,
                                   const T* weight, bool training, T* grad_weight, T* grad_bias,
                                   double* coef) {
  __shared__ double sh[kThreads];
  const int64_t count = N * S;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const T m = mean[c];
    double sum_dy = 0, sum_dy_xmu = 0;
    for (int64_t j = threadIdx.x; j < count; j += kThreads) {
      const int64_t off = ((j / S) * C + c) * S + j % S;
      const double g = static_cast<double>(dy[off]);
      sum_dy += g;
      sum_dy_xmu += g * static_cast<double>(x[off] - m);
    }
    sum_dy = block_sum(sum_dy, sh);
    sum_dy_xmu = block_sum(sum_dy_xmu, sh);
    if (threadIdx.x == 0) {
      const double is = static_cast<double>(invstd[c]);
      if (grad_weight) grad_weight[c] = static_cast<T>(sum_dy_xmu * is);
      if (grad_bias) grad_bias[c] = static_cast<T>(sum_dy);
      const double w = weight ? static_cast<double>(weight[c]) : 1.0;
      const double a = w * is;
      double b = 0, k = 0;
      if (training) {
        b = -w * is * is * is * (sum_dy_xmu / static_cast<double>(count));
        k = -w * is * (sum_dy / static_cast<double>(count)) - b * static_cast<double>(m);
      }
      coef[c] = a;
      coef[C + c] = b;
      coef[2 * C + c] = k;
    }
  }
}

// dx (N, C, S) = a[c] * dy + b[c] * x + k[c].
template <typename T>
__global__ void bn_backward_apply(const T* __restrict__ dy, const T* __restrict__ x,
                                  T* __restrict__ dx, const double* coef, int64_t C, int64_t S,
                                  int64_t total) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (j / S) % C;
    dx[j] = static_cast<T>(coef[c]) * dy[j] + static_cast<T>(coef[C + c]) * x[j] +
            static_cast<T>(coef[2 * C + c]);
  }
}

template <typename T>
void forward(const native::BatchNormShape& s, const void* x, const void* weight, const void* bias,
             void* running_mean, void* running_var, bool training, double momentum, double eps,
             void* y, void* save_mean, void* save_invstd, double* scratch, cudaStream_t stream) {
  const int64_t C = s.channels, S = s.spatial, total = s.batch * C * S;
  if (C == 0) return;
  const T* w = static_cast<const T*>(weight);
  const T* b = static_cast<const T*>(bias);
  if (training) {
    bn_train_stats<T><<<blocks_for(C, 1), kThreads, 0, stream>>>(
        static_cast<const T*>(x), s.batch, C, S, w, b, eps, static_cast<T*>(running_mean),
        static_cast<T*>(running_var), momentum, static_cast<T*>(save_mean),
        static_cast<T*>(save_invstd), scratch);
  } else {
    bn_eval_stats<T><<<blocks_for(C, kThreads), kThreads, 0, stream>>>(
        C, w, b, eps, static_cast<const T*>(running_mean), static_cast<const T*>(running_var),
        static_cast<T*>(save_mean), static_cast<T*>(save_invstd), scratch);
  }
  LOOM_CUDA_CHECK(cudaGetLastError());
  if (total == 0) return;
  bn_apply<T><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<T*>(y), scratch, C, S, total);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void backward(const native::BatchNormShape& s, const void* grad_out, const void* x,
              const void* mean, const void* invstd, const void* weight, bool training,
              void* grad_input, void* grad_weight, void* grad_bias, double* scratch,
              cudaStream_t stream) {
  const int64_t C = s.channels, S = s.spatial, total = s.batch * C * S;
  if (C == 0) return;
  bn_backward_reduce<T><<<blocks_for(C, 1), kThreads, 0, stream>>>(
      static_cast<const T*>(grad_out), static_cast<const T*>(x), s.batch, C, S,
      static_cast<const T*>(mean), static_cast<const T*>(invstd),
      static_cast<const T*>(weight), training, static_cast<T*>(grad_weight),
      static_cast<T*>(grad_bias), scratch);
  LOOM_CUDA_CHECK(cudaGetLastError());
  if (!grad_input || total == 0) return;
  bn_backward_apply<T><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(
      static_cast<const T*>(grad_out), static_cast<const T*>(x), static_cast<T*>(grad_input),
      scratch, C, S, total);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void batch_norm_forward(DType dtype, const native::BatchNormShape& s, const void* x,
                        const void* weight, const void* bias, void* running_mean,
                        void* running_var, bool training, double momentum, double eps, void* y,
                        void* save_mean, void* save_invstd, double* scratch, int device,
                        uint64_t stream) {
  DeviceGuard guard(device);
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  dispatch_floating(dtype, "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward<T>(s, x, weight, bias, running_mean, running_var, training, momentum, eps, y,
               save_mean, save_invstd, scratch, st);
  });
}

void batch_norm_backward(DType dtype, const native::BatchNormShape& s, const void* grad_out,
                         const void* x, const void* mean, const void* invstd, const void* weight,
                         bool training, void* grad_input, void* grad_weight, void* grad_bias,
                         double* scratch, int device, uint64_t stream) {
  DeviceGuard guard(device);
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  dispatch_floating(dtype, "batch_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward<T>(s, grad_out, x, mean, invstd, weight, training, grad_input, grad_weight,
                grad_bias, scratch, st);
  });
}

}  // namespace cuda
}  // namespace loom
