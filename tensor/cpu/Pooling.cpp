// Pooling kernels: loops over planes, with the window bounds clipped once
// per output row/column instead of per element.  float max_pool2d runs an
// AVX2 path, 8 outputs at a time; bfloat16 max_pool2d runs it on widened
// planes.
#include "tensor/cpu/Pooling.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/cpu/Bfloat16Runs.h"
#include "tensor/cpu/PoolWindow.h"
#include "tensor/native/Pooling.h"

namespace loom {
namespace cpu {
namespace {

// Runs fn(p0, p1) over plane ranges, about 32K elements per task.
template <typename Fn>
void for_planes(const PoolGeometry& g, const Fn& fn) {
  const int64_t per_plane = std::max<int64_t>(1, g.height * g.width + g.out_h * g.out_w);
  parallel_for(0, g.planes, std::max<int64_t>(1, 32768 / per_plane), fn);
}

// One plane, generic windows, scalar.
template <typename T>
void max_pool_plane(const PoolGeometry& g, const T* in, T* o, int64_t* ix) {
  const int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const auto [h0, h1] = window_taps(oh * g.stride_h - g.pad_h, g.kernel_h, g.dilation_h, H);
    for (int64_t ow = 0; ow < OW; ++ow) {
      const auto [w0, w1] =
          window_taps(ow * g.stride_w - g.pad_w, g.kernel_w, g.dilation_w, W);
      T best = -std::numeric_limits<T>::infinity();
      int64_t at = h0 < h1 && w0 < w1 ? h0 * W + w0 : -1;  // -1: empty window
      for (int64_t h = h0; h < h1; h += g.dilation_h)
        for (int64_t w = w0; w < w1; w += g.dilation_w) take_max(in[h * W + w], h * W + w, best, at);
      o[oh * OW + ow] = best;
      ix[oh * OW + ow] = at;
    }
  }
}

// The floats a load of 8 lanes at stride s spans (16 for stride 2: two
// loads, deinterleaved).
inline int64_t strided_span(int64_t s) { return s == 1 ? 8 : s == 2 ? 16 : 7 * s + 1; }

// 8 floats at p, p + s, ..., p + 7 s (lane_s holds 0, s, ..., 7 s).  With
// readable < the floats the load spans, only p[0, readable) is read and the
// lanes past it hold 0: a row's last block, whose lanes past the row are
// never stored.
inline __m256 load_strided(const float* p, int64_t s, __m256i lane_s, int64_t readable) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  if (readable >= strided_span(s)) {
    if (s == 1) return _mm256_loadu_ps(p);
    if (s == 2) {
      const __m256 even = _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), 0x88);
      return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8));
    }
    return _mm256_i32gather_ps(p, lane_s, 4);
  }
  const __m256i limit = _mm256_set1_epi32(static_cast<int32_t>(std::max<int64_t>(readable, 0)));
  if (s == 1) return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(limit, lane));
  if (s == 2) {
    const __m256i lane_hi = _mm256_add_epi32(lane, _mm256_set1_epi32(8));
    const __m256 lo = _mm256_maskload_ps(p, _mm256_cmpgt_epi32(limit, lane));
    const __m256 hi = _mm256_maskload_ps(p + 8, _mm256_cmpgt_epi32(limit, lane_hi));
    const __m256 even = _mm256_shuffle_ps(lo, hi, 0x88);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8));
  }
  const __m256 in_row = _mm256_castsi256_ps(_mm256_cmpgt_epi32(limit, lane_s));
  return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), p, lane_s, in_row, 4);
}

// Whether every window of g lies inside the plane (no padding, and no
// ceil_mode window past the edge): the taps then read the plane itself.
bool windows_inside(const PoolGeometry& g) {
  return g.pad_h == 0 && g.pad_w == 0 &&
         (g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h < g.height &&
         (g.out_w - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w < g.width;
}

// n copies of -inf at p.
void fill_minus_infinity(float* p, int64_t n) {
  const __m256 v = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(p + i, v);
  for (; i < n; ++i) p[i] = -std::numeric_limits<float>::infinity();
}

// One float plane, 8 outputs at a time with selects instead of branches
// (random data makes the max comparison unpredictable).  When every window
// lies inside the plane the taps read it directly (a row's last loads
// through a mask); otherwise they read a -inf-bordered copy, so no tap needs
// a bounds check.  The last block of a row is shifted back to end at OW;
// rows narrower than 8 store through a mask.
void max_pool_plane_f32(const PoolGeometry& g, const float* in, float* o, int64_t* ix,
                        std::vector<float>& pad) {
  const int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w;
  const int64_t sh = g.stride_h, sw = g.stride_w, dh = g.dilation_h, dw = g.dilation_w;
  const int64_t last_block = std::max<int64_t>(OW - 8, 0);
  const bool inside = windows_inside(g);
  const float* src = in;
  int64_t ld = W;
  if (!inside) {
    const int64_t span = strided_span(sw);  // columns one vector load touches
    const int64_t rows = std::max((OH - 1) * sh + (g.kernel_h - 1) * dh + 1, g.pad_h + H);
    const int64_t cols = std::max(last_block * sw + (g.kernel_w - 1) * dw + span, g.pad_w + W);
    pad.resize(rows * cols);
    fill_minus_infinity(pad.data(), rows * cols);
    for (int64_t h = 0; h < H; ++h)
      std::copy(in + h * W, in + (h + 1) * W, pad.data() + (h + g.pad_h) * cols + g.pad_w);
    src = pad.data();
    ld = cols;
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lane_s = _mm256_mullo_epi32(lane, _mm256_set1_epi32(static_cast<int32_t>(sw)));
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t hs = oh * sh - g.pad_h;  // input row of tap 0
    const auto [h0, h1] = inside ? WindowTaps{hs, hs + (g.kernel_h - 1) * dh + 1}
                                 : window_taps(hs, g.kernel_h, dh, H);
    for (int64_t ow0 = 0; ow0 < OW; ow0 += 8) {
      const int64_t b = std::min(ow0, last_block);
      // PyTorch's initial index: the first in-bounds tap of each window.
      __m256i at;
      const int64_t ws0 = b * sw - g.pad_w;
      if (ws0 >= 0 && h0 < h1) {
        at = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(h0 * W + ws0)), lane_s);
      } else {
        int32_t first[8];
        for (int l = 0; l < 8; ++l) {
          const int64_t ws = ws0 + l * sw;
          const auto [w0, w1] = window_taps(ws, g.kernel_w, dw, W);
          first[l] = h0 < h1 && w0 < w1 ? static_cast<int32_t>(h0 * W + w0) : -1;
        }
        at = _mm256_setr_epi32(first[0], first[1], first[2], first[3], first[4], first[5],
                               first[6], first[7]);
      }
      __m256 best = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
      for (int64_t i = 0; i < g.kernel_h; ++i) {
        const int64_t h = hs + i * dh;
        const float* row = src + (h + g.pad_h) * ld;
        for (int64_t j = 0; j < g.kernel_w; ++j) {
          const int64_t w = b * sw - g.pad_w + j * dw;  // input column of lane 0
          const __m256 v = load_strided(row + w + g.pad_w, sw, lane_s, ld - w - g.pad_w);
          const __m256i cand =
              _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(h * W + w)), lane_s);
          const __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ),
                                           _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
          best = _mm256_blendv_ps(best, v, take);
          at = _mm256_castps_si256(
              _mm256_blendv_ps(_mm256_castsi256_ps(at), _mm256_castsi256_ps(cand), take));
        }
      }
      const __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(at));
      const __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(at, 1));
      int64_t* dst = ix + oh * OW + b;
      if (OW >= 8) {
        _mm256_storeu_ps(o + oh * OW + b, best);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 4), hi);
      } else {
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(OW)), lane);
        _mm256_maskstore_ps(o + oh * OW, keep, best);
        _mm256_maskstore_epi64(reinterpret_cast<long long*>(dst),
                               _mm256_cvtepi32_epi64(_mm256_castsi256_si128(keep)), lo);
        _mm256_maskstore_epi64(reinterpret_cast<long long*>(dst + 4),
                               _mm256_cvtepi32_epi64(_mm256_extracti128_si256(keep, 1)), hi);
      }
    }
  }
}

// One plane: the vector path for float (it keeps indices in int32, so
// planes under 2^30 values), the scalar one otherwise.
template <typename T>
void max_pool_plane_any(const PoolGeometry& g, const T* in, T* o, int64_t* ix,
                        std::vector<float>& pad) {
  if constexpr (std::is_same_v<T, float>) {
    if (g.height * g.width < (int64_t{1} << 30)) return max_pool_plane_f32(g, in, o, ix, pad);
  }
  max_pool_plane(g, in, o, ix);
}

// One plane's input gradient in Acc: zeroed, then each output's gradient
// (G) added at the input its max came from.
template <typename G, typename Acc>
void max_pool_plane_backward(const PoolGeometry& g, const G* go, const int64_t* ix, Acc* gi) {
  const int64_t HW = g.height * g.width, OHW = g.out_h * g.out_w;
  std::fill(gi, gi + HW, Acc(0));
  for (int64_t i = 0; i < OHW; ++i)
    if (ix[i] >= 0 && ix[i] < HW) gi[ix[i]] += static_cast<Acc>(go[i]);
}

}  // namespace

template <typename T>
void max_pool2d_forward(const PoolGeometry& g, const T* input, T* out, int64_t* indices) {
  const int64_t HW = g.height * g.width, OHW = g.out_h * g.out_w;
  for_planes(g, [&](int64_t p0, int64_t p1) {
    std::vector<float> pad;
    for (int64_t p = p0; p < p1; ++p)
      max_pool_plane_any<T>(g, input + p * HW, out + p * OHW, indices + p * OHW, pad);
  });
}

// bfloat16, a plane at a time through float32 plane buffers: the forward
// widens the plane and runs the float32 kernel (the max of bfloat16 values
// narrows back exactly), the backward accumulates the gradient of the plane
// in float32 and rounds it once.  The float32 kernels' results, without
// float32 copies of the tensors.
void max_pool2d_forward_bfloat16(const PoolGeometry& g, const BFloat16* input, BFloat16* out,
                                 int64_t* indices) {
  const int64_t HW = g.height * g.width, OHW = g.out_h * g.out_w;
  for_planes(g, [&](int64_t p0, int64_t p1) {
    std::vector<float> plane(HW), pooled(OHW), pad;
    for (int64_t p = p0; p < p1; ++p) {
      widen_bfloat16(input + p * HW, plane.data(), HW);
      max_pool_plane_any<float>(g, plane.data(), pooled.data(), indices + p * OHW, pad);
      narrow_to_bfloat16(pooled.data(), out + p * OHW, OHW);
    }
  });
}

void max_pool2d_backward_bfloat16(const PoolGeometry& g, const BFloat16* grad_out,
                                  const int64_t* indices, BFloat16* grad_input) {
  const int64_t HW = g.height * g.width, OHW = g.out_h * g.out_w;
  for_planes(g, [&](int64_t p0, int64_t p1) {
    std::vector<float> gi(HW);
    for (int64_t p = p0; p < p1; ++p) {
      max_pool_plane_backward(g, grad_out + p * OHW, indices + p * OHW, gi.data());
      narrow_to_bfloat16(gi.data(), grad_input + p * HW, HW);
    }
  });
}

template <typename T>
void max_pool2d_backward(const PoolGeometry& g, const T* grad_out, const int64_t* indices,
                         T* grad_input) {
  const int64_t HW = g.height * g.width, OHW = g.out_h * g.out_w;
  for_planes(g, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      max_pool_plane_backward(g, grad_out + p * OHW, indices + p * OHW, grad_input + p * HW);
  });
}

namespace {

// The clipped window of output (oh, ow) and its divisor; false when empty.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
};

AvgWindow avg_window(const PoolGeometry& g, bool count_include_pad, int64_t oh, int64_t ow) {
  AvgWindow win;
  int64_t hs = oh * g.stride_h - g.pad_h, ws = ow * g.stride_w - g.pad_w;
  int64_t he = std::min(hs + g.kernel_h, g.height + g.pad_h);
  int64_t we = std::min(ws + g.kernel_w, g.width + g.pad_w);
  const int64_t pool_size = (he - hs) * (we - ws);
  win.h0 = std::max<int64_t>(hs, 0);
  win.w0 = std::max<int64_t>(ws, 0);
  win.h1 = std::min(he, g.height);
  win.w1 = std::min(we, g.width);
  win.divisor = count_include_pad ? pool_size : (win.h1 - win.h0) * (win.w1 - win.w0);
  return win;
}

}  // namespace

template <typename T>
void avg_pool2d_forward(const PoolGeometry& g, bool count_include_pad, const T* input, T* out) {
  const int64_t HW = g.height * g.width, OHW = g.out_h * g.out_w;
  for_planes(g, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* in = input + p * HW;
      T* o = out + p * OHW;
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const AvgWindow w = avg_window(g, count_include_pad, oh, ow);
          if (w.h0 >= w.h1 || w.w0 >= w.w1) {
            o[oh * g.out_w + ow] = T(0);
            continue;
          }
          T sum = 0;
          for (int64_t h = w.h0; h < w.h1; ++h)
            for (int64_t x = w.w0; x < w.w1; ++x) sum += in[h * g.width + x];
          o[oh * g.out_w + ow] = sum / static_cast<T>(w.divisor);
        }
    }
  });
}

template <typename T>
void avg_pool2d_backward(const PoolGeometry& g, bool count_include_pad, const T* grad_out,
                         T* grad_input) {
  const int64_t HW = g.height * g.width, OHW = g.out_h * g.out_w;
  for_planes(g, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gi = grad_input + p * HW;
      std::fill(gi, gi + HW, T(0));
      const T* go = grad_out + p * OHW;
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const AvgWindow w = avg_window(g, count_include_pad, oh, ow);
          if (w.h0 >= w.h1 || w.w0 >= w.w1) continue;
          const T v = go[oh * g.out_w + ow] / static_cast<T>(w.divisor);
          for (int64_t h = w.h0; h < w.h1; ++h)
            for (int64_t x = w.w0; x < w.w1; ++x) gi[h * g.width + x] += v;
        }
    }
  });
}

namespace {
int64_t adaptive_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
int64_t adaptive_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }
}  // namespace

template <typename T>
void adaptive_avg_pool2d_forward(const PoolGeometry& g, const T* input, T* out) {
  const int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w;
  for_planes(g, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* in = input + p * H * W;
      T* o = out + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = adaptive_start(oh, H, OH), h1 = adaptive_end(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = adaptive_start(ow, W, OW), w1 = adaptive_end(ow, W, OW);
          T sum = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) sum += in[h * W + w];
          o[oh * OW + ow] = sum / static_cast<T>((h1 - h0) * (w1 - w0));
        }
      }
    }
  });
}

template <typename T>
void adaptive_avg_pool2d_backward(const PoolGeometry& g, const T* grad_out, T* grad_input) {
  const int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w;
  for_planes(g, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gi = grad_input + p * H * W;
      std::fill(gi, gi + H * W, T(0));
      const T* go = grad_out + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = adaptive_start(oh, H, OH), h1 = adaptive_end(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = adaptive_start(ow, W, OW), w1 = adaptive_end(ow, W, OW);
          const T v = go[oh * OW + ow] / static_cast<T>((h1 - h0) * (w1 - w0));
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) gi[h * W + w] += v;
        }
      }
    }
  });
}

#define LOOM_POOL_INSTANTIATE(T)                                                               \
  template void max_pool2d_forward<T>(const PoolGeometry&, const T*, T*, int64_t*);           \
  template void max_pool2d_backward<T>(const PoolGeometry&, const T*, const int64_t*, T*);    \
  template void avg_pool2d_forward<T>(const PoolGeometry&, bool, const T*, T*);               \
  template void avg_pool2d_backward<T>(const PoolGeometry&, bool, const T*, T*);              \
  template void adaptive_avg_pool2d_forward<T>(const PoolGeometry&, const T*, T*);            \
  template void adaptive_avg_pool2d_backward<T>(const PoolGeometry&, const T*, T*);
LOOM_POOL_INSTANTIATE(float)
LOOM_POOL_INSTANTIATE(double)
#undef LOOM_POOL_INSTANTIATE

// ---- the dispatch slots (native/Pooling.h) ---------------------------------------

namespace {

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// dispatch_floating with bfloat16 (the kernels that take it as it is).
template <typename Fn>
void dispatch_pool_dtype(DType dtype, const char* what, Fn&& fn) {
  if (dtype == kBFloat16) return fn(TypeTag<BFloat16>{});
  dispatch_floating(dtype, what, fn);
}

void max_pool2d_kernel(const PoolGeometry& g, const Tensor& input, const Tensor& out,
                       const Tensor& indices) {
  if (g.channels_last)
    return dispatch_pool_dtype(input.dtype(), "max_pool2d", [&](auto tag) {
      using T = typename decltype(tag)::type;
      max_pool2d_forward_channels_last<T>(g, ptr<T>(input), ptr<T>(out), ptr<int64_t>(indices));
    });
  if (input.dtype() == kBFloat16)
    return max_pool2d_forward_bfloat16(g, ptr<BFloat16>(input), ptr<BFloat16>(out),
                                       ptr<int64_t>(indices));
  dispatch_floating(input.dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool2d_forward<T>(g, ptr<T>(input), ptr<T>(out), ptr<int64_t>(indices));
  });
}

void max_pool2d_backward_kernel(const PoolGeometry& g, const Tensor& grad_output,
                                const Tensor& indices, const Tensor& grad_input) {
  if (g.channels_last)
    return dispatch_pool_dtype(grad_input.dtype(), "max_pool2d_backward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      max_pool2d_backward_channels_last<T>(g, ptr<T>(grad_output), ptr<int64_t>(indices),
                                           ptr<T>(grad_input));
    });
  if (grad_input.dtype() == kBFloat16)
    return max_pool2d_backward_bfloat16(g, ptr<BFloat16>(grad_output), ptr<int64_t>(indices),
                                        ptr<BFloat16>(grad_input));
  dispatch_floating(grad_input.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool2d_backward<T>(g, ptr<T>(grad_output), ptr<int64_t>(indices), ptr<T>(grad_input));
  });
}

void avg_pool2d_kernel(const PoolGeometry& g, bool count_include_pad, const Tensor& input,
                       const Tensor& out) {
  dispatch_floating(input.dtype(), "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool2d_forward<T>(g, count_include_pad, ptr<T>(input), ptr<T>(out));
  });
}

void avg_pool2d_backward_kernel(const PoolGeometry& g, bool count_include_pad,
                                const Tensor& grad_output, const Tensor& grad_input) {
  dispatch_floating(grad_input.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool2d_backward<T>(g, count_include_pad, ptr<T>(grad_output), ptr<T>(grad_input));
  });
}

void adaptive_avg_pool2d_kernel(const PoolGeometry& g, const Tensor& input, const Tensor& out) {
  dispatch_floating(input.dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    adaptive_avg_pool2d_forward<T>(g, ptr<T>(input), ptr<T>(out));
  });
}

void adaptive_avg_pool2d_backward_kernel(const PoolGeometry& g, const Tensor& grad_output,
                                         const Tensor& grad_input) {
  dispatch_floating(grad_input.dtype(), "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    adaptive_avg_pool2d_backward<T>(g, ptr<T>(grad_output), ptr<T>(grad_input));
  });
}

// bfloat16 max pooling runs as it is (the planes widened one at a time).
bool max_pool2d_takes_kernel(DType dtype) { return dtype == kBFloat16; }

// Channels-last inputs run as they are (PoolingChannelsLast.cpp).
bool max_pool2d_channels_last_kernel(DType dtype) {
  return dtype == kFloat32 || dtype == kFloat64 || dtype == kBFloat16;
}

}  // namespace

static const native::RegisterKernel reg_max_pool2d_channels_last(
    native::max_pool2d_channels_last_stub, kCPU, &max_pool2d_channels_last_kernel);
static const native::RegisterKernel reg_max_pool2d_takes(native::max_pool2d_takes_stub, kCPU,
                                                         &max_pool2d_takes_kernel);
static const native::RegisterKernel reg_max_pool2d(native::max_pool2d_stub, kCPU,
                                                   &max_pool2d_kernel);
static const native::RegisterKernel reg_max_pool2d_backward(native::max_pool2d_backward_stub,
                                                            kCPU, &max_pool2d_backward_kernel);
static const native::RegisterKernel reg_avg_pool2d(native::avg_pool2d_stub, kCPU,
                                                   &avg_pool2d_kernel);
static const native::RegisterKernel reg_avg_pool2d_backward(native::avg_pool2d_backward_stub,
                                                            kCPU, &avg_pool2d_backward_kernel);
static const native::RegisterKernel reg_adaptive_avg_pool2d(native::adaptive_avg_pool2d_stub,
                                                            kCPU, &adaptive_avg_pool2d_kernel);
static const native::RegisterKernel reg_adaptive_avg_pool2d_backward(
    native::adaptive_avg_pool2d_backward_stub, kCPU, &adaptive_avg_pool2d_backward_kernel);

}  // namespace cpu
}  // namespace loom
