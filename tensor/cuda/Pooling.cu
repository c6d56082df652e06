// 2-D pooling on CUDA with loom's own kernels, not cuDNN's: cuDNN's max
// pooling returns no indices (loom's backward takes them, as PyTorch's does),
// and its average pooling's divisor differs from PyTorch's (which the CPU
// follows) at clipped windows in ceil_mode.  One thread per output element
// (forward) or per input element (backward), grid-stride over (planes, rows,
// cols) flattened; window bounds and divisors are the CPU's
// (tensor/cpu/Pooling.cpp) formula for formula.
//
// The average backwards gather: each input element walks the few windows
// that can contain it, in the same (oh, ow) order in which the CPU scatters,
// so results equal the CPU's bit for bit and need no atomics.  The max
// backward cannot gather -- it is given only the indices, not the windows --
// so it scatters grad_out into a zeroed grad_input with atomicAdd (overlapping
// windows sharing a maximum then add in an unspecified order).
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/Pooling.h"
#include "tensor/cuda/PoolingIndex.h"

namespace loom {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// First index >= lo on the lattice start + k * step (k >= 0).
__device__ __forceinline__ int64_t first_on_lattice(int64_t start, int64_t step, int64_t lo) {
  if (start >= lo) return start;
  return start + (lo - start + step - 1) / step * step;
}

// ---- max -------------------------------------------------------------------------------

// out, indices (planes, OH, OW) from input (planes, H, W).
template <typename T>
__global__ void max_pool_forward(native::PoolGeometry g, const T* __restrict__ input,
                                 T* __restrict__ out, int64_t* __restrict__ indices) {
  const int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w;
  LOOM_CUDA_GRID_STRIDE(j, g.planes * OH * OW) {
    const int64_t ow = j % OW, oh = (j / OW) % OH, p = j / (OW * OH);
    const T* in = input + p * H * W;
    const int64_t hs = oh * g.stride_h - g.pad_h, ws = ow * g.stride_w - g.pad_w;
    const int64_t h0 = first_on_lattice(hs, g.dilation_h, 0);
    const int64_t h1 = min(hs + (g.kernel_h - 1) * g.dilation_h + 1, H);
    const int64_t w0 = first_on_lattice(ws, g.dilation_w, 0);
    const int64_t w1 = min(ws + (g.kernel_w - 1) * g.dilation_w + 1, W);
    T best = -std::numeric_limits<T>::infinity();
    int64_t at = h0 < h1 && w0 < w1 ? h0 * W + w0 : -1;  // -1: empty window
    for (int64_t h = h0; h < h1; h += g.dilation_h)
      for (int64_t w = w0; w < w1; w += g.dilation_w) {
        const T v = in[h * W + w];
        if (v > best || v != v) {  // NaN wins (the last NaN, as on the CPU)
          best = v;
          at = h * W + w;
        }
      }
    out[j] = best;
    indices[j] = at;
  }
}

// grad_input (planes, H, W), zeroed, += grad_out (planes, OH, OW) at indices.
template <typename T>
__global__ void max_pool_backward(native::PoolGeometry g, const T* __restrict__ grad_out,
                                  const int64_t* __restrict__ indices, T* grad_input) {
  const int64_t HW = g.height * g.width, OHW = g.out_h * g.out_w;
  LOOM_CUDA_GRID_STRIDE(j, g.planes * OHW) {
    const int64_t at = indices[j];
    if (at >= 0 && at < HW) atomicAdd(grad_input + (j / OHW) * HW + at, grad_out[j]);
  }
}

// ---- average ---------------------------------------------------------------------------

struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};

__device__ __forceinline__ AvgWindow avg_window(const native::PoolGeometry& g,
                                                bool count_include_pad, int64_t oh, int64_t ow) {
  AvgWindow win;
  const int64_t hs = oh * g.stride_h - g.pad_h, ws = ow * g.stride_w - g.pad_w;
  const int64_t he = min(hs + g.kernel_h, g.height + g.pad_h);
  const int64_t we = min(ws + g.kernel_w, g.width + g.pad_w);
  const int64_t pool_size = (he - hs) * (we - ws);
  win.h0 = max(hs, int64_t{0});
  win.w0 = max(ws, int64_t{0});
  win.h1 = min(he, g.height);
  win.w1 = min(we, g.width);
  win.divisor = count_include_pad ? pool_size : (win.h1 - win.h0) * (win.w1 - win.w0);
  return win;
}

// out (planes, OH, OW) from input (planes, H, W).
template <typename T>
__global__ void avg_pool_forward(native::PoolGeometry g, bool count_include_pad,
                                 const T* __restrict__ input, T* __restrict__ out) {
  const int64_t OH = g.out_h, OW = g.out_w;
  LOOM_CUDA_GRID_STRIDE(j, g.planes * OH * OW) {
    const int64_t ow = j % OW, oh = (j / OW) % OH, p = j / (OW * OH);
    const T* in = input + p * g.height * g.width;
    const AvgWindow w = avg_window(g, count_include_pad, oh, ow);
    if (w.h0 >= w.h1 || w.w0 >= w.w1) {
      out[j] = T(0);
      continue;
    }
    T sum = 0;
    for (int64_t h = w.h0; h < w.h1; ++h)
      for (int64_t x = w.w0; x < w.w1; ++x) sum += in[h * g.width + x];
    out[j] = sum / static_cast<T>(w.divisor);
  }
}

// grad_input (planes, H, W) from grad_out (planes, OH, OW): each input
// element sums the windows with hs <= h < hs + kernel (and likewise in w).
template <typename T>
__global__ void avg_pool_backward(native::PoolGeometry g, bool count_include_pad,
                                  const T* __restrict__ grad_out, T* __restrict__ grad_input) {
  const int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w;
  LOOM_CUDA_GRID_STRIDE(j, g.planes * H * W) {
    const int64_t w = j % W, h = (j / W) % H, p = j / (W * H);
    const T* go = grad_out + p * OH * OW;
    const OutputRange rh = avg_pool_outputs_covering(h, g.pad_h, g.kernel_h, g.stride_h, OH);
    const OutputRange rw = avg_pool_outputs_covering(w, g.pad_w, g.kernel_w, g.stride_w, OW);
    T acc = 0;
    for (int64_t oh = rh.begin; oh < rh.end; ++oh)
      for (int64_t ow = rw.begin; ow < rw.end; ++ow) {
        const AvgWindow win = avg_window(g, count_include_pad, oh, ow);
        if (win.h0 >= win.h1 || win.w0 >= win.w1) continue;
        if (h < win.h0 || h >= win.h1 || w < win.w0 || w >= win.w1) continue;
        acc += go[oh * OW + ow] / static_cast<T>(win.divisor);
      }
    grad_input[j] = acc;
  }
}

// ---- adaptive average ------------------------------------------------------------------

__device__ __forceinline__ int64_t adaptive_start(int64_t i, int64_t in, int64_t out) {
  return (i * in) / out;
}
__device__ __forceinline__ int64_t adaptive_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// out (planes, OH, OW) from input (planes, H, W).
template <typename T>
__global__ void adaptive_avg_forward(native::PoolGeometry g, const T* __restrict__ input,
                                     T* __restrict__ out) {
  const int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w;
  LOOM_CUDA_GRID_STRIDE(j, g.planes * OH * OW) {
    const int64_t ow = j % OW, oh = (j / OW) % OH, p = j / (OW * OH);
    const T* in = input + p * H * W;
    const int64_t h0 = adaptive_start(oh, H, OH), h1 = adaptive_end(oh, H, OH);
    const int64_t w0 = adaptive_start(ow, W, OW), w1 = adaptive_end(ow, W, OW);
    T sum = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) sum += in[h * W + w];
    out[j] = sum / static_cast<T>((h1 - h0) * (w1 - w0));
  }
}

// grad_input (planes, H, W): input row h lies in the windows of outputs
// floor(h * OH / H) .. ceil((h + 1) * OH / H) - 1 (likewise for columns).
template <typename T>
__global__ void adaptive_avg_backward(native::PoolGeometry g, const T* __restrict__ grad_out,
                                      T* __restrict__ grad_input) {
  const int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w;
  LOOM_CUDA_GRID_STRIDE(j, g.planes * H * W) {
    const int64_t w = j % W, h = (j / W) % H, p = j / (W * H);
    const T* go = grad_out + p * OH * OW;
    const OutputRange rh = adaptive_outputs_covering(h, H, OH);
    const OutputRange rw = adaptive_outputs_covering(w, W, OW);
    T acc = 0;
    for (int64_t oh = rh.begin; oh < rh.end; ++oh) {
      const int64_t h0 = adaptive_start(oh, H, OH), h1 = adaptive_end(oh, H, OH);
      if (h < h0 || h >= h1) continue;
      for (int64_t ow = rw.begin; ow < rw.end; ++ow) {
        const int64_t w0 = adaptive_start(ow, W, OW), w1 = adaptive_end(ow, W, OW);
        if (w < w0 || w >= w1) continue;
        acc += go[oh * OW + ow] / static_cast<T>((h1 - h0) * (w1 - w0));
      }
    }
    grad_input[j] = acc;
  }
}


// Runs fn(TypeTag<T>, stream) on `device` for a floating dtype, then checks the launch.
template <typename Fn>
void launch(DType dtype, const char* what, int device, uint64_t stream, Fn&& fn) {
  DeviceGuard guard(device);
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  dispatch_floating(dtype, what, [&](auto tag) { fn(tag, s); });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

int64_t out_count(const native::PoolGeometry& g) { return g.planes * g.out_h * g.out_w; }
int64_t in_count(const native::PoolGeometry& g) { return g.planes * g.height * g.width; }

}  // namespace

void max_pool2d_forward(DType dtype, const native::PoolGeometry& g, const void* input, void* out,
                        int64_t* indices, int device, uint64_t stream) {
  const int64_t n = out_count(g);
  if (n == 0) return;
  launch(dtype, "max_pool2d", device, stream, [&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    max_pool_forward<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>(g, static_cast<const T*>(input),
                                                            static_cast<T*>(out), indices);
  });
}

void max_pool2d_backward(DType dtype, const native::PoolGeometry& g, const void* grad_out,
                         const int64_t* indices, void* grad_input, int device, uint64_t stream) {
  const int64_t n = out_count(g);
  launch(dtype, "max_pool2d_backward", device, stream, [&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    if (in_count(g) == 0) return;
    LOOM_CUDA_CHECK(cudaMemsetAsync(grad_input, 0, in_count(g) * sizeof(T), s));
    if (n == 0) return;
    max_pool_backward<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
        g, static_cast<const T*>(grad_out), indices, static_cast<T*>(grad_input));
  });
}

void avg_pool2d_forward(DType dtype, const native::PoolGeometry& g, bool count_include_pad,
                        const void* input, void* out, int device, uint64_t stream) {
  const int64_t n = out_count(g);
  if (n == 0) return;
  launch(dtype, "avg_pool2d", device, stream, [&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    avg_pool_forward<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
        g, count_include_pad, static_cast<const T*>(input), static_cast<T*>(out));
  });
}

void avg_pool2d_backward(DType dtype, const native::PoolGeometry& g, bool count_include_pad,
                         const void* grad_out, void* grad_input, int device, uint64_t stream) {
  const int64_t n = in_count(g);
  if (n == 0) return;
  launch(dtype, "avg_pool2d_backward", device, stream, [&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    avg_pool_backward<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
        g, count_include_pad, static_cast<const T*>(grad_out), static_cast<T*>(grad_input));
  });
}

void adaptive_avg_pool2d_forward(DType dtype, const native::PoolGeometry& g, const void* input,
                                 void* out, int device, uint64_t stream) {
  const int64_t n = out_count(g);
  if (n == 0) return;
  launch(dtype, "adaptive_avg_pool2d", device, stream, [&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    adaptive_avg_forward<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>(g, static_cast<const T*>(input),
                                                                static_cast<T*>(out));
  });
}

void adaptive_avg_pool2d_backward(DType dtype, const native::PoolGeometry& g, const void* grad_out,
                                  void* grad_input, int device, uint64_t stream) {
  const int64_t n = in_count(g);
  if (n == 0) return;
  launch(dtype, "adaptive_avg_pool2d_backward", device, stream, [&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    adaptive_avg_backward<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
        g, static_cast<const T*>(grad_out), static_cast<T*>(grad_input));
  });
}

}  // namespace cuda
}  // namespace loom
