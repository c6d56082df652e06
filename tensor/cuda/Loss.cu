// CUDA losses (see Loss.h): nll, fused cross_entropy (log_softmax + nll +
// label smoothing) and squared error, with the CPU kernels' formulas
// (tensor/cpu/Loss.cpp), forward and backward.
//
// Cross entropy never materialises log-probabilities: the forward keeps one
// logsumexp per sample, the backward recomputes p = exp(x - lse) as it writes
// each gradient.  Forward shapes: for (N, C) input (S == 1) a group of
// threads per sample (a warp, or the whole block for C > 1024) strides over
// the contiguous row and combines max, sum of exp and the smoothing sum in a
// shared-memory tree; for S > 1 each thread takes one sample (neighbouring
// samples are neighbouring addresses, so loads coalesce).  The backward is
// elementwise over (N, C, S).
//
// Reductions to one value (the loss total, the total weight, the mse sum) are
// two launches: kReduceBlocks blocks each sum a fixed grid-stride share into
// `scratch`, then one block sums those partials in a tree.  The grid never
// depends on the device, so totals are deterministic run to run.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Loss.h"

namespace loom {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kReduceBlocks = 256;  // partial sums per total; 2 totals fit kLossScratch
static_assert(2 * kReduceBlocks <= kLossScratch, "scratch too small for the partial sums");
constexpr int64_t kWarpRowLimit = 1024;



__device__ __forceinline__ float exp_of(float v) { return expf(v); }
__device__ __forceinline__ double exp_of(double v) { return ::exp(v); }

// Combines v over the `group` aligned threads holding it (max when is_max,
// else sum); every thread of the block calls this.  buf: kThreads doubles.
__device__ double group_reduce(double v, double* buf, int group, bool is_max) {
  const int t = threadIdx.x;
  const int lane = t % group;
  buf[t] = v;
  __syncthreads();
  for (int s = group / 2; s > 0; s >>= 1) {
    if (lane < s) buf[t] = is_max ? (buf[t] > buf[t + s] ? buf[t] : buf[t + s]) : buf[t] + buf[t + s];
    __syncthreads();
  }
  const double r = buf[t - lane];
  __syncthreads();
  return r;
}

// Sums of the whole block into (a, b) of thread 0; every thread calls this.
__device__ void block_sum2(double& a, double& b, double* buf_a, double* buf_b) {
  const int t = threadIdx.x;
  buf_a[t] = a;
  buf_b[t] = b;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) {
      buf_a[t] += buf_a[t + s];
      buf_b[t] += buf_b[t + s];
    }
    __syncthreads();
  }
  a = buf_a[0];
  b = buf_b[0];
}

// ---- class losses: forward ------------------------------------------------------

struct ClassArgs {
  int64_t N, C, S, ignore_index;
  double eps;  // label smoothing
};

__device__ __forceinline__ bool is_target(int64_t t, const ClassArgs& a) {
  return t != a.ignore_index && t >= 0 && t < a.C;
}

// x (N, C, S), target (N * S), weight (C) or null -> loss (N * S) of T, and the
// per-sample loss and weight in double into loss_d / weight_d (N * S each),
// logsumexp (N * S) when cross_entropy.  `group` threads per sample.
template <typename T>
__global__ void cross_entropy_forward(const T* __restrict__ x, const int64_t* __restrict__ target,
                                      const T* __restrict__ weight, ClassArgs a, int group,
                                      T* __restrict__ loss, double* __restrict__ loss_d,
                                      double* __restrict__ weight_d, double* __restrict__ lse_out) {
  __shared__ double buf[kThreads];
  const int lane = threadIdx.x % group;
  const int groups = kThreads / group;
  const int64_t samples = a.N * a.S;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * groups; base < samples;
       base += static_cast<int64_t>(gridDim.x) * groups) {
    const int64_t i = base + threadIdx.x / group;
    const bool valid = i < samples;
    const int64_t n = valid ? i / a.S : 0, s = valid ? i % a.S : 0;
    const T* row = x + n * a.C * a.S + s;  // class c at row[c * S]
    T m = -INFINITY;
    if (valid)
      for (int64_t c = lane; c < a.C; c += group) m = row[c * a.S] > m ? row[c * a.S] : m;
    m = static_cast<T>(group_reduce(static_cast<double>(m), buf, group, true));
    double sum_exp = 0;
    if (valid)
      for (int64_t c = lane; c < a.C; c += group)
        sum_exp += static_cast<double>(exp_of(row[c * a.S] - m));
    sum_exp = group_reduce(sum_exp, buf, group, false);
    const double lse = static_cast<double>(m) + ::log(sum_exp);
    double smooth = 0;
    if (a.eps > 0) {
      if (valid)
        for (int64_t c = lane; c < a.C; c += group)
          smooth += weight ? static_cast<double>(weight[c]) * (lse - row[c * a.S])
                           : lse - row[c * a.S];
      smooth = group_reduce(smooth, buf, group, false);
    }
    if (!valid || lane != 0) continue;
    lse_out[i] = lse;
    const int64_t t = target[i];
    if (!is_target(t, a)) {
      loss[i] = 0;
      loss_d[i] = 0;
      weight_d[i] = 0;
      continue;
    }
    const double wt = weight ? static_cast<double>(weight[t]) : 1.0;
    double l = wt * (lse - row[t * a.S]);
    if (a.eps > 0) l = (1 - a.eps) * l + a.eps / static_cast<double>(a.C) * smooth;
    loss[i] = static_cast<T>(l);
    loss_d[i] = l;
    weight_d[i] = wt;
  }
}

template <typename T>
__global__ void nll_forward(const T* __restrict__ x, const int64_t* __restrict__ target,
                            const T* __restrict__ weight, ClassArgs a, T* __restrict__ loss,
                            double* __restrict__ loss_d, double* __restrict__ weight_d) {
  const int64_t samples = a.N * a.S;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < samples;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = target[i];
    if (!is_target(t, a)) {
      loss[i] = 0;
      loss_d[i] = 0;
      weight_d[i] = 0;
      continue;
    }
    const int64_t n = i / a.S, s = i % a.S;
    const double w = weight ? static_cast<double>(weight[t]) : 1.0;
    const double l = -w * x[(n * a.C + t) * a.S + s];
    loss[i] = static_cast<T>(l);
    loss_d[i] = l;
    weight_d[i] = w;
  }
}

// First level of a total: block b sums its grid-stride share of a[i] and b[i]
// (b may be null) into partial[b] and partial[kReduceBlocks + b].
__global__ void partial_sums(const double* __restrict__ va, const double* __restrict__ vb,
                             int64_t n, double* __restrict__ partial) {
  __shared__ double buf_a[kThreads], buf_b[kThreads];
  double a = 0, b = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    a += va[i];
    if (vb) b += vb[i];
  }
  block_sum2(a, b, buf_a, buf_b);
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = a;
    partial[kReduceBlocks + blockIdx.x] = b;
  }
}

// Second level: out = sum_a (/ sum_b when divide_by_b, / divisor otherwise),
// total_b = sum_b.  One block of kReduceBlocks threads.
template <typename T>
__global__ void finish_sums(const double* __restrict__ partial, T* out, double* total_b,
                            bool divide_by_b, double divisor) {
  __shared__ double buf_a[kReduceBlocks], buf_b[kReduceBlocks];
  double a = partial[threadIdx.x], b = partial[kReduceBlocks + threadIdx.x];
  block_sum2(a, b, buf_a, buf_b);
  if (threadIdx.x != 0) return;
  if (out) *out = static_cast<T>(divide_by_b ? a / b : a / divisor);
  if (total_b) *total_b = b;
}

// ---- class losses: backward -----------------------------------------------------

// sum of the class weights into *w_all (one block).
template <typename T>
__global__ void weight_sum(const T* __restrict__ weight, int64_t C, double* w_all) {
  __shared__ double buf_a[kThreads], buf_b[kThreads];
  double a = 0, b = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) a += static_cast<double>(weight[c]);
  block_sum2(a, b, buf_a, buf_b);
  if (threadIdx.x == 0) *w_all = a;
}

// grad_input (N, C, S), elementwise; see cpu::cross_entropy_backward_kernel:
//   out_c = a * p_c - b * w_c, then out_t -= d.
template <typename T>
__global__ void cross_entropy_backward(T* __restrict__ gi, const T* __restrict__ grad,
                                       bool broadcast, const double* __restrict__ divisor,
                                       const T* __restrict__ x,
                                       const double* __restrict__ lse,
                                       const int64_t* __restrict__ target,
                                       const T* __restrict__ weight,
                                       const double* __restrict__ w_all_p, ClassArgs a) {
  const int64_t numel = a.N * a.C * a.S;
  const double w_all = weight ? *w_all_p : static_cast<double>(a.C);
  const double scale = divisor ? 1.0 / *divisor : 1.0;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < numel;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = e % a.S;
    const int64_t c = (e / a.S) % a.C;
    const int64_t n = e / (a.S * a.C);
    const int64_t i = n * a.S + s;
    const int64_t t = target[i];
    if (!is_target(t, a)) {
      gi[e] = 0;
      continue;
    }
    const double g = scale * grad[broadcast ? 0 : i];
    const double wt = weight ? static_cast<double>(weight[t]) : 1.0;
    const double ca = g * ((1 - a.eps) * wt + a.eps / a.C * w_all);
    const double cb = g * a.eps / a.C;
    const double cd = g * (1 - a.eps) * wt;
    const T at = static_cast<T>(ca), bt = static_cast<T>(cb);
    T v = at * exp_of(static_cast<T>(x[e] - lse[i]));
    if (cb != 0) v = v - bt * (weight ? weight[c] : T(1));
    if (c == t) v -= static_cast<T>(cd);
    gi[e] = v;
  }
}

// grad_input (N, C, S) zero-filled; one thread per sample.
template <typename T>
__global__ void nll_backward(T* __restrict__ gi, const T* __restrict__ grad, bool broadcast,
                             const double* __restrict__ divisor,
                             const int64_t* __restrict__ target, const T* __restrict__ weight,
                             ClassArgs a) {
  const int64_t samples = a.N * a.S;
  const double scale = divisor ? 1.0 / *divisor : 1.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < samples;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = target[i];
    if (!is_target(t, a)) continue;
    const int64_t n = i / a.S, s = i % a.S;
    const double w = weight ? static_cast<double>(weight[t]) : 1.0;
    gi[(n * a.C + t) * a.S + s] = static_cast<T>(-w * scale * grad[broadcast ? 0 : i]);
  }
}

// ---- squared error --------------------------------------------------------------

template <typename T>
__global__ void squared_error_kernel(const T* __restrict__ x, const T* __restrict__ y, int64_t n,
                                     T* __restrict__ out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T d = x[i] - y[i];
    out[i] = d * d;
  }
}

template <typename T>
__global__ void squared_error_partials(const T* __restrict__ x, const T* __restrict__ y,
                                       int64_t n, double* __restrict__ partial) {
  __shared__ double buf_a[kThreads], buf_b[kThreads];
  double a = 0, b = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(y[i]);
    a += d * d;
  }
  block_sum2(a, b, buf_a, buf_b);
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = a;
    partial[kReduceBlocks + blockIdx.x] = 0;
  }
}

template <typename T>
__global__ void squared_error_backward_kernel(T* __restrict__ gi, const T* __restrict__ grad,
                                              bool broadcast, T two_scale,
                                              const T* __restrict__ x, const T* __restrict__ y,
                                              int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T k = two_scale * grad[broadcast ? 0 : i];
    gi[i] = k * (x[i] - y[i]);
  }
}

}  // namespace

void class_loss_forward(DType dtype, bool cross_entropy, const void* x, const int64_t* target,
                        const void* weight, int64_t N, int64_t C, int64_t S, int64_t ignore_index,
                        double label_smoothing, void* loss, double* logsumexp, void* out,
                        double* total_weight, bool mean, double* scratch, int device,
                        uint64_t stream) {
  DeviceGuard guard(device);
  cudaStream_t st = as_stream(stream);
  const ClassArgs a{N, C, S, ignore_index, label_smoothing};
  const int64_t samples = N * S;
  double* partial = scratch;                  // (2 * kReduceBlocks)
  double* loss_d = scratch + kLossScratch;    // (samples)
  double* weight_d = loss_d + samples;        // (samples)
  dispatch_floating(dtype, cross_entropy ? "cross_entropy" : "nll_loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x);
    const T* wp = static_cast<const T*>(weight);
    T* lp = static_cast<T*>(loss);
    if (samples > 0) {
      if (cross_entropy) {
        const int group = S > 1 ? 1 : (C <= kWarpRowLimit ? 32 : kThreads);
        const int64_t groups = kThreads / group;
        cross_entropy_forward<T><<<grid_for((samples + groups - 1) / groups), kThreads, 0, st>>>(
            xp, target, wp, a, group, lp, loss_d, weight_d, logsumexp);
      } else {
        nll_forward<T><<<blocks_for(samples, kThreads), kThreads, 0, st>>>(
            xp, target, wp, a, lp, loss_d, weight_d);
      }
      LOOM_CUDA_CHECK(cudaGetLastError());
    }
    partial_sums<<<kReduceBlocks, kThreads, 0, st>>>(loss_d, weight_d, samples, partial);
    LOOM_CUDA_CHECK(cudaGetLastError());
    finish_sums<T><<<1, kReduceBlocks, 0, st>>>(partial, static_cast<T*>(out), total_weight,
                                                 mean, 1.0);
    LOOM_CUDA_CHECK(cudaGetLastError());
  });
}

void class_loss_backward(DType dtype, bool cross_entropy, void* grad_input, const void* grad,
                         bool grad_broadcast, const double* divisor, const void* x,
                         const double* logsumexp, const int64_t* target,
                         const void* weight, int64_t N, int64_t C, int64_t S,
                         int64_t ignore_index, double label_smoothing, double* scratch,
                         int device, uint64_t stream) {
  DeviceGuard guard(device);
  cudaStream_t st = as_stream(stream);
  const ClassArgs a{N, C, S, ignore_index, label_smoothing};
  dispatch_floating(dtype, cross_entropy ? "cross_entropy_backward" : "nll_loss_backward",
                    [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* gi = static_cast<T*>(grad_input);
    const T* g = static_cast<const T*>(grad);
    const T* wp = static_cast<const T*>(weight);
    if (cross_entropy) {
      const int64_t numel = N * C * S;
      if (numel == 0) return;
      if (wp) {
        weight_sum<T><<<1, kThreads, 0, st>>>(wp, C, scratch);
        LOOM_CUDA_CHECK(cudaGetLastError());
      }
      cross_entropy_backward<T><<<blocks_for(numel, kThreads), kThreads, 0, st>>>(
          gi, g, grad_broadcast, divisor, static_cast<const T*>(x), logsumexp, target,
          wp, scratch, a);
    } else {
      const int64_t samples = N * S;
      if (samples == 0) return;
      nll_backward<T><<<blocks_for(samples, kThreads), kThreads, 0, st>>>(
          gi, g, grad_broadcast, divisor, target, wp, a);
    }
    LOOM_CUDA_CHECK(cudaGetLastError());
  });
}

void squared_error(DType dtype, const void* x, const void* y, int64_t n, bool per_element,
                   double divisor, void* out, double* scratch, int device, uint64_t stream) {
  DeviceGuard guard(device);
  cudaStream_t st = as_stream(stream);
  dispatch_floating(dtype, "mse_loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x);
    const T* yp = static_cast<const T*>(y);
    if (per_element) {
      if (n == 0) return;
      squared_error_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, st>>>(
          xp, yp, n, static_cast<T*>(out));
    } else {
      squared_error_partials<T><<<kReduceBlocks, kThreads, 0, st>>>(xp, yp, n, scratch);
      LOOM_CUDA_CHECK(cudaGetLastError());
      finish_sums<T><<<1, kReduceBlocks, 0, st>>>(scratch, static_cast<T*>(out), nullptr, false,
                                                   divisor);
    }
    LOOM_CUDA_CHECK(cudaGetLastError());
  });
}

void squared_error_backward(DType dtype, void* grad_input, const void* grad, bool grad_broadcast,
                            double two_scale, const void* x, const void* y, int64_t n,
                            int device, uint64_t stream) {
  if (n == 0) return;
  DeviceGuard guard(device);
  cudaStream_t st = as_stream(stream);
  dispatch_floating(dtype, "mse_loss_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    squared_error_backward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, st>>>(
        static_cast<T*>(grad_input), static_cast<const T*>(grad), grad_broadcast,
        static_cast<T>(two_scale), static_cast<const T*>(x), static_cast<const T*>(y), n);
    LOOM_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace cuda
}  // namespace loom
