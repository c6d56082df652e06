// CUDA softmax / log_softmax, forward and backward, over a contiguous
// (outer, D, inner) block (see Softmax.h), with the CPU kernels' formulas
// (tensor/cpu/Softmax.cpp): max subtracted before exp, sums in double,
// log_softmax as (x - m) - log(s).
//
// Two kernel shapes, as in Reduce.cu:
//   - rows (inner == 1, softmax over the last dim): a group of threads per
//     row, one warp for rows up to kWarpRowLimit values, the whole 256-thread
//     block for longer ones.  The group strides over the row for the max,
//     then the sum, combining partials in a shared-memory tree (fixed order,
//     so results are deterministic), then writes the row.  x is read three
//     times, out written once: nothing is staged, so any D fits.
//   - lanes (inner > 1): one thread per (o, i) lane walks the D values
//     `inner` apart; neighbouring threads read neighbouring addresses, so
//     every load coalesces.
// Grid-stride loops keep every grid within 65535 blocks; each loop bound is
// uniform across a block, so every __syncthreads is reached by all threads.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Softmax.h"

namespace loom {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kWarpRowLimit = 1024;



__device__ __forceinline__ float exp_of(float v) { return expf(v); }
__device__ __forceinline__ double exp_of(double v) { return ::exp(v); }

struct MaxOp {
  __device__ double operator()(double a, double b) const { return a > b ? a : b; }
};
struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// Combines v over the `group` threads (aligned, a power of two) holding it;
// every thread of the block must call this.  buf: kThreads doubles.
template <typename Op>
__device__ double group_reduce(double v, double* buf, int group, Op op) {
  const int t = threadIdx.x;
  const int lane = t % group;
  buf[t] = v;
  __syncthreads();
  for (int s = group / 2; s > 0; s >>= 1) {
    if (lane < s) buf[t] = op(buf[t], buf[t + s]);
    __syncthreads();
  }
  const double r = buf[t - lane];
  __syncthreads();  // buf is rewritten by the next call
  return r;
}

// x, out: (outer, D) rows.
template <typename T>
__global__ void softmax_rows(const T* __restrict__ x, T* __restrict__ out, int64_t outer,
                             int64_t D, int group, bool log) {
  __shared__ double buf[kThreads];
  const int lane = threadIdx.x % group;
  const int groups = kThreads / group;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * groups; base < outer;
       base += static_cast<int64_t>(gridDim.x) * groups) {
    const int64_t row = base + threadIdx.x / group;
    const bool valid = row < outer;
    const T* xr = x + (valid ? row : 0) * D;
    T m = -INFINITY;
    if (valid)
      for (int64_t j = lane; j < D; j += group) m = xr[j] > m ? xr[j] : m;
    m = static_cast<T>(group_reduce(static_cast<double>(m), buf, group, MaxOp()));
    double s = 0;
    if (valid)
      for (int64_t j = lane; j < D; j += group) s += static_cast<double>(exp_of(xr[j] - m));
    s = group_reduce(s, buf, group, SumOp());
    if (!valid) continue;
    T* yr = out + row * D;
    if (log) {
      const T log_s = static_cast<T>(::log(s));
      for (int64_t j = lane; j < D; j += group) yr[j] = (xr[j] - m) - log_s;
    } else {
      const T inv = static_cast<T>(1.0 / s);
      for (int64_t j = lane; j < D; j += group) yr[j] = exp_of(xr[j] - m) * inv;
    }
  }
}

// x, out: (outer, D, inner); one thread per (o, i).
template <typename T>
__global__ void softmax_lanes(const T* __restrict__ x, T* __restrict__ out, int64_t outer,
                              int64_t D, int64_t inner, bool log) {
  const int64_t lanes = outer * inner;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < lanes;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = k / inner, i = k % inner;
    const T* xl = x + o * D * inner + i;
    T* yl = out + o * D * inner + i;
    T m = -INFINITY;
    for (int64_t j = 0; j < D; ++j) m = xl[j * inner] > m ? xl[j * inner] : m;
    double s = 0;
    for (int64_t j = 0; j < D; ++j) s += static_cast<double>(exp_of(xl[j * inner] - m));
    if (log) {
      const T log_s = static_cast<T>(::log(s));
      for (int64_t j = 0; j < D; ++j) yl[j * inner] = (xl[j * inner] - m) - log_s;
    } else {
      const T inv = static_cast<T>(1.0 / s);
      for (int64_t j = 0; j < D; ++j) yl[j * inner] = exp_of(xl[j * inner] - m) * inv;
    }
  }
}

// g, y, gi: (outer, D) rows.  log: gi = g - exp(y) * sum(g); else
// gi = y * (g - sum(g * y)).
template <typename T>
__global__ void backward_rows(const T* __restrict__ g, const T* __restrict__ y,
                              T* __restrict__ gi, int64_t outer, int64_t D, int group, bool log) {
  __shared__ double buf[kThreads];
  const int lane = threadIdx.x % group;
  const int groups = kThreads / group;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * groups; base < outer;
       base += static_cast<int64_t>(gridDim.x) * groups) {
    const int64_t row = base + threadIdx.x / group;
    const bool valid = row < outer;
    const int64_t off = (valid ? row : 0) * D;
    double s = 0;
    if (valid) {
      if (log)
        for (int64_t j = lane; j < D; j += group) s += static_cast<double>(g[off + j]);
      else
        for (int64_t j = lane; j < D; j += group)
          s += static_cast<double>(g[off + j]) * static_cast<double>(y[off + j]);
    }
    const T st = static_cast<T>(group_reduce(s, buf, group, SumOp()));
    if (!valid) continue;
    if (log)
      for (int64_t j = lane; j < D; j += group) gi[off + j] = g[off + j] - exp_of(y[off + j]) * st;
    else
      for (int64_t j = lane; j < D; j += group) gi[off + j] = y[off + j] * (g[off + j] - st);
  }
}

template <typename T>
__global__ void backward_lanes(const T* __restrict__ g, const T* __restrict__ y,
                               T* __restrict__ gi, int64_t outer, int64_t D, int64_t inner,
                               bool log) {
  const int64_t lanes = outer * inner;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < lanes;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (k / inner) * D * inner + k % inner;
    double s = 0;
    for (int64_t j = 0; j < D; ++j) {
      const int64_t e = base + j * inner;
      s += log ? static_cast<double>(g[e]) : static_cast<double>(g[e]) * static_cast<double>(y[e]);
    }
    const T st = static_cast<T>(s);
    for (int64_t j = 0; j < D; ++j) {
      const int64_t e = base + j * inner;
      gi[e] = log ? g[e] - exp_of(y[e]) * st : y[e] * (g[e] - st);
    }
  }
}

// Calls fn(TypeTag<T>) for float32/float64.
template <typename Fn>
void floating(DType dtype, const char* who, Fn&& fn) {
  dispatch_floating(dtype, who, fn);
}

}  // namespace

void softmax_forward(DType dtype, const void* x, void* out, int64_t outer, int64_t D,
                     int64_t inner, bool log, int device, uint64_t stream) {
  if (outer * D * inner == 0) return;
  DeviceGuard guard(device);
  cudaStream_t s = as_stream(stream);
  floating(dtype, log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x);
    T* op = static_cast<T*>(out);
    if (inner == 1) {
      const int group = D <= kWarpRowLimit ? 32 : kThreads;
      const int64_t groups = kThreads / group;
      softmax_rows<T><<<grid_for((outer + groups - 1) / groups), kThreads, 0, s>>>(
          xp, op, outer, D, group, log);
    } else {
      softmax_lanes<T><<<grid_for((outer * inner + kThreads - 1) / kThreads), kThreads, 0, s>>>(
          xp, op, outer, D, inner, log);
    }
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

void softmax_backward(DType dtype, const void* grad, const void* output, void* grad_input,
                      int64_t outer, int64_t D, int64_t inner, bool log, int device,
                      uint64_t stream) {
  if (outer * D * inner == 0) return;
  DeviceGuard guard(device);
  cudaStream_t s = as_stream(stream);
  floating(dtype, log ? "log_softmax_backward" : "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = static_cast<const T*>(grad);
    const T* y = static_cast<const T*>(output);
    T* gi = static_cast<T*>(grad_input);
    if (inner == 1) {
      const int group = D <= kWarpRowLimit ? 32 : kThreads;
      const int64_t groups = kThreads / group;
      backward_rows<T><<<grid_for((outer + groups - 1) / groups), kThreads, 0, s>>>(
          g, y, gi, outer, D, group, log);
    } else {
      backward_lanes<T><<<grid_for((outer * inner + kThreads - 1) / kThreads), kThreads, 0, s>>>(
          g, y, gi, outer, D, inner, log);
    }
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda
}  // namespace loom
