// 2-D pooling on CUDA with loom's own kernels, not cuDNN's: cuDNN's max
// pooling returns no indices (loom's backward takes them, as PyTorch's does),
// and its average pooling's divisor differs from PyTorch's (which the CPU
// follows) at clipped windows in ceil_mode.  Window bounds and divisors are
// the CPU's (tensor/cpu/Pooling.cpp, PoolWindow.h) formula for formula.
//
// Max pooling takes float32, float64, float16 and bfloat16 as they are, in
// both layouts.  Its kernels see every input as images of (H, W, channels)
// with the channels innermost: a channels-last tensor (N, H, W, C) is N
// images of C channels, and NCHW planes are N * C images of one channel, so
// one forward and one backward kernel serve both.  One thread takes V
// adjacent channels of one output pixel (forward) or one input pixel
// (backward), and adjacent threads take adjacent channel groups, so a warp's
// loads and stores are contiguous runs: V = 16 bytes of T (8 float16/
// bfloat16, 4 float32, 2 float64) when the channel count and the pointers
// allow 16-byte accesses, else 1.  For the ResNet stem ([256, 64, 112, 112]
// channels-last float16, 3x3 stride 2 pad 1) that is 8 threads a pixel, a
// warp reading 4 pixels' 128-byte channel rows per tap.  Flat thread indices
// are split by IntDivider (no 64-bit division) when the launch's work is below
// 2^31 (for the stem, batches up to about 2,600 even at one channel a
// thread), else by 64-bit division.
//
// The forward compares in compute_type_t<T> (float for 16-bit) tap by tap in
// the CPU's order: the first maximum wins ties, a NaN always wins (so the
// last NaN of a window does), and the output is the winning input value
// itself, bit for bit.  The backward gathers, as PyTorch's CUDA kernel does:
// each input element walks the few outputs whose windows can contain it
// (PoolingIndex.h), in the (oh, ow) order in which the CPU scatters, adds the
// gradients of those whose argmax is this element in float32 (float64 for
// float64) from zero, and writes its element once -- no zero-fill pass, no
// atomics, deterministic, and equal to the CPU's sums bit for bit.  It needs
// the indices the forward gave for the same window arguments: an index
// outside its window is never visited (the CPU would still scatter it).
//
// The average backwards gather the same way (each input element walks the
// windows that can contain it, in the CPU's order), so their results too
// equal the CPU's bit for bit and need no atomics.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>

#include "tensor/CudaRuntime.h"
#include "tensor/DType.h"
#include "tensor/Half.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/IntDivider.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/Pooling.h"
#include "tensor/cuda/PoolingIndex.h"
#include "tensor/cuda/VectorAccess.cuh"

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

// n / d for the flat indices of one launch, d fixed at launch: IntDivider's
// multiply-shift where every index and divisor is below 2^31 (I = uint32_t),
// else 64-bit division (I = int64_t).
template <typename I>
struct Split {
  I d = 1;
  explicit Split(int64_t divisor) : d(divisor) {}
  __host__ __device__ I divisor() const { return d; }
  __host__ __device__ I div(I n) const { return n / d; }
};

template <>
struct Split<uint32_t> {
  IntDivider d;
  explicit Split(int64_t divisor) : d(static_cast<uint32_t>(divisor)) {}
  __host__ __device__ uint32_t divisor() const { return d.divisor(); }
  __host__ __device__ uint32_t div(uint32_t n) const { return d.div(n); }
};

// Channels one thread takes when the channel count allows: 16 bytes of T.
template <typename T>
constexpr int kVecOf = static_cast<int>(16 / sizeof(T));

// for (I j = this thread's first item; j < n; j += every thread of the grid);
// below 2^31 + the grid's size, so uint32_t never wraps.
#define LOOM_POOL_GRID_STRIDE(I, j, n)                                                    \
  for (I j = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + threadIdx.x; j < (n); \
       j += static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x))

// out, indices (images, OH, OW, C) from input (images, H, W, C), where C =
// g.channels (1 for NCHW planes).  Thread j takes channels [cv * V, cv * V +
// V) of output pixel (n, oh, ow); work = images * OH * OW * C / V.
template <typename T, int V, typename I>
__global__ void max_pool_forward(native::PoolGeometry g, Split<I> by_group, Split<I> by_ow,
                                 Split<I> by_oh, I work, const T* __restrict__ input,
                                 T* __restrict__ out, int64_t* __restrict__ indices) {
  using C = compute_type_t<T>;
  const int64_t H = g.height, W = g.width, channels = g.channels;
  LOOM_POOL_GRID_STRIDE(I, j, work) {
    const I pixel = by_group.div(j), row = by_ow.div(pixel), n = by_oh.div(row);
    const int64_t c0 = static_cast<int64_t>(j - pixel * by_group.divisor()) * V;
    const int64_t ow = pixel - row * by_ow.divisor(), oh = row - n * by_oh.divisor();
    const int64_t hs = oh * g.stride_h - g.pad_h, ws = ow * g.stride_w - g.pad_w;
    const int64_t h0 = first_on_lattice(hs, g.dilation_h, 0);
    const int64_t h1 = min(hs + (g.kernel_h - 1) * g.dilation_h + 1, H);
    const int64_t w0 = first_on_lattice(ws, g.dilation_w, 0);
    const int64_t w1 = min(ws + (g.kernel_w - 1) * g.dilation_w + 1, W);
    const T* image = input + static_cast<int64_t>(n) * H * W * channels + c0;
    C best[V];
    Vec<T, V> value;
    Vec<int64_t, V> at;
    const int64_t first = h0 < h1 && w0 < w1 ? h0 * W + w0 : -1;  // -1: empty window
#pragma unroll
    for (int k = 0; k < V; ++k) {
      best[k] = -std::numeric_limits<C>::infinity();
      value.v[k] = static_cast<T>(best[k]);
      at.v[k] = first;
    }
    for (int64_t h = h0; h < h1; h += g.dilation_h)
      for (int64_t w = w0; w < w1; w += g.dilation_w) {
        const int64_t tap = h * W + w;
        const Vec<T, V> p = load_vec<T, V>(image + tap * channels);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const C v = static_cast<C>(p.v[k]);
          if (v > best[k] || v != v) {  // NaN wins (the last NaN, as on the CPU)
            best[k] = v;
            value.v[k] = p.v[k];
            at.v[k] = tap;
          }
        }
      }
    // Output pixel (n, oh, ow), channel c0: element j * V.
    store_vec<T, V>(out + static_cast<int64_t>(j) * V, value);
    store_vec<int64_t, V>(indices + static_cast<int64_t>(j) * V, at);
  }
}

// grad_input (images, H, W, C) from grad_out and indices (images, OH, OW,
// C).  Thread j takes channels [cv * V, cv * V + V) of input pixel (n, h,
// w): the sum, in compute_type_t<T> from zero and in the CPU's (oh, ow)
// order, of grad_out at the outputs around it whose index is h * W + w;
// work = images * H * W * C / V.
template <typename T, int V, typename I>
__global__ void max_pool_backward(native::PoolGeometry g, Split<I> by_group, Split<I> by_w,
                                  Split<I> by_h, Split<I> by_stride_h, Split<I> by_stride_w,
                                  I work, const T* __restrict__ grad_out,
                                  const int64_t* __restrict__ indices,
                                  T* __restrict__ grad_input) {
  using Acc = compute_type_t<T>;
  const int64_t W = g.width, OH = g.out_h, OW = g.out_w, channels = g.channels;
  const I span_h = static_cast<I>((g.kernel_h - 1) * g.dilation_h + 1);
  const I span_w = static_cast<I>((g.kernel_w - 1) * g.dilation_w + 1);
  LOOM_POOL_GRID_STRIDE(I, j, work) {
    const I pixel = by_group.div(j), row = by_w.div(pixel), n = by_h.div(row);
    const int64_t c0 = static_cast<int64_t>(j - pixel * by_group.divisor()) * V;
    const I w = pixel - row * by_w.divisor(), h = row - n * by_h.divisor();
    const IndexRange<I> rh = max_pool_outputs_covering<I>(
        h, static_cast<I>(g.pad_h), span_h, static_cast<I>(OH), by_stride_h);
    const IndexRange<I> rw = max_pool_outputs_covering<I>(
        w, static_cast<I>(g.pad_w), span_w, static_cast<I>(OW), by_stride_w);
    const int64_t here = static_cast<int64_t>(h) * W + w;
    const int64_t image = static_cast<int64_t>(n) * OH;
    Acc acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = Acc(0);
    for (int64_t oh = rh.begin; oh < rh.end; ++oh)
      for (int64_t ow = rw.begin; ow < rw.end; ++ow) {
        const int64_t o = ((image + oh) * OW + ow) * channels + c0;
        const Vec<int64_t, V> from = load_vec<int64_t, V>(indices + o);
        bool any = false;
#pragma unroll
        for (int k = 0; k < V; ++k) any |= from.v[k] == here;
        if (!any) continue;
        const Vec<T, V> go = load_vec<T, V>(grad_out + o);
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (from.v[k] == here) acc[k] += static_cast<Acc>(go.v[k]);
      }
    Vec<T, V> gi;
#pragma unroll
    for (int k = 0; k < V; ++k) gi.v[k] = static_cast<T>(acc[k]);
    store_vec<T, V>(grad_input + static_cast<int64_t>(j) * V, gi);  // (n, h, w), channel c0
  }
}

#undef LOOM_POOL_GRID_STRIDE

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

// The max-pool kernels' view of g: images of (H, W, channels), channels
// innermost (one channel an image for NCHW planes).
native::PoolGeometry images_of(const native::PoolGeometry& g) {
  native::PoolGeometry k = g;
  if (!g.channels_last) k.channels = 1;
  return k;
}

// Whether every flat index of the launch, every divisor and every window
// position fits IntDivider (below 2^31).
bool splits_narrow(int64_t work, const native::PoolGeometry& k) {
  const int64_t limit = int64_t{1} << 31;
  return work < limit && k.height + k.pad_h < limit && k.width + k.pad_w < limit &&
         k.stride_h < limit && k.stride_w < limit &&
         (k.kernel_h - 1) * k.dilation_h + 1 < limit && (k.kernel_w - 1) * k.dilation_w + 1 < limit;
}

// V = kVecOf<T> where the channel count divides into groups of V and every
// pointer allows 16-byte accesses; else 1.
template <typename T>
bool vectorizes(const native::PoolGeometry& k, std::initializer_list<const void*> pointers) {
  if (kVecOf<T> == 1 || k.channels % kVecOf<T> != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

template <typename T, int V, typename I>
void forward_as(const native::PoolGeometry& k, int64_t work, const T* input, T* out,
                int64_t* indices, cudaStream_t s) {
  max_pool_forward<T, V, I><<<blocks_for(work, kThreads), kThreads, 0, s>>>(
      k, Split<I>(k.channels / V), Split<I>(k.out_w), Split<I>(k.out_h), static_cast<I>(work),
      input, out, indices);
}

template <typename T, int V, typename I>
void backward_as(const native::PoolGeometry& k, int64_t work, const T* grad_out,
                 const int64_t* indices, T* grad_input, cudaStream_t s) {
  max_pool_backward<T, V, I><<<blocks_for(work, kThreads), kThreads, 0, s>>>(
      k, Split<I>(k.channels / V), Split<I>(k.width), Split<I>(k.height), Split<I>(k.stride_h),
      Split<I>(k.stride_w), static_cast<I>(work), grad_out, indices, grad_input);
}

template <typename T, int V>
void max_pool_forward_launch(const native::PoolGeometry& k, const T* input, T* out,
                             int64_t* indices, cudaStream_t s) {
  const int64_t work = k.planes * k.out_h * k.out_w / V;
  if (work == 0) return;
  if (splits_narrow(work, k)) return forward_as<T, V, uint32_t>(k, work, input, out, indices, s);
  forward_as<T, V, int64_t>(k, work, input, out, indices, s);
}

template <typename T, int V>
void max_pool_backward_launch(const native::PoolGeometry& k, const T* grad_out,
                              const int64_t* indices, T* grad_input, cudaStream_t s) {
  const int64_t work = k.planes * k.height * k.width / V;
  if (work == 0) return;
  if (splits_narrow(work, k))
    return backward_as<T, V, uint32_t>(k, work, grad_out, indices, grad_input, s);
  backward_as<T, V, int64_t>(k, work, grad_out, indices, grad_input, s);
}

}  // namespace

void max_pool2d_forward(DType dtype, const native::PoolGeometry& g, const void* input, void* out,
                        int64_t* indices, int device, uint64_t stream) {
  const native::PoolGeometry k = images_of(g);
  DeviceGuard guard(device);
  const cudaStream_t s = as_stream(stream);
  dispatch_all_floating(dtype, "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(input);
    T* y = static_cast<T*>(out);
    if (vectorizes<T>(k, {x, y, indices}))
      max_pool_forward_launch<T, kVecOf<T>>(k, x, y, indices, s);
    else
      max_pool_forward_launch<T, 1>(k, x, y, indices, s);
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

void max_pool2d_backward(DType dtype, const native::PoolGeometry& g, const void* grad_out,
                         const int64_t* indices, void* grad_input, int device, uint64_t stream) {
  const native::PoolGeometry k = images_of(g);
  DeviceGuard guard(device);
  const cudaStream_t s = as_stream(stream);
  dispatch_all_floating(dtype, "max_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* go = static_cast<const T*>(grad_out);
    T* gi = static_cast<T*>(grad_input);
    if (vectorizes<T>(k, {go, indices, gi}))
      max_pool_backward_launch<T, kVecOf<T>>(k, go, indices, gi, s);
    else
      max_pool_backward_launch<T, 1>(k, go, indices, gi, s);
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
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
