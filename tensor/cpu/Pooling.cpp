// Pooling kernels: plain loops over planes, with the window bounds clipped
// once per output row/column instead of per element.  max_pool2d has a fast
// path for the ubiquitous 2x2 / stride 2 / no padding case.
#include "tensor/cpu/Pooling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/Parallel.h"

namespace loom {
namespace cpu {
namespace {

// Runs fn(p0, p1) over plane ranges, about 32K elements per task.
template <typename Fn>
void for_planes(const PoolGeometry& g, const Fn& fn) {
  const int64_t per_plane = std::max<int64_t>(1, g.height * g.width + g.out_h * g.out_w);
  parallel_for(0, g.planes, std::max<int64_t>(1, 32768 / per_plane), fn);
}

// First index >= lo on the lattice start + k * step (k >= 0).
int64_t first_on_lattice(int64_t start, int64_t step, int64_t lo) {
  if (start >= lo) return start;
  return start + (lo - start + step - 1) / step * step;
}

template <typename T>
inline bool better(T v, T best) {
  return v > best || std::isnan(v);
}

template <typename T>
void max_pool_2x2(const PoolGeometry& g, const T* in, T* out, int64_t* idx) {
  const int64_t W = g.width, OH = g.out_h, OW = g.out_w;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const T* r0 = in + 2 * oh * W;
    const T* r1 = r0 + W;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t w = 2 * ow;
      T best = r0[w];
      int64_t at = 2 * oh * W + w;
      if (better(r0[w + 1], best)) best = r0[w + 1], at = 2 * oh * W + w + 1;
      if (better(r1[w], best)) best = r1[w], at = (2 * oh + 1) * W + w;
      if (better(r1[w + 1], best)) best = r1[w + 1], at = (2 * oh + 1) * W + w + 1;
      out[oh * OW + ow] = best;
      idx[oh * OW + ow] = at;
    }
  }
}

}  // namespace

template <typename T>
void max_pool2d_forward(const PoolGeometry& g, const T* input, T* out, int64_t* indices) {
  const int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w;
  const bool fast = g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 &&
                    g.pad_h == 0 && g.pad_w == 0 && g.dilation_h == 1 && g.dilation_w == 1 &&
                    2 * OH <= H && 2 * OW <= W;
  for_planes(g, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* in = input + p * H * W;
      T* o = out + p * OH * OW;
      int64_t* ix = indices + p * OH * OW;
      if (fast) {
        max_pool_2x2(g, in, o, ix);
        continue;
      }
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t hs = oh * g.stride_h - g.pad_h;
        const int64_t h0 = first_on_lattice(hs, g.dilation_h, 0);
        const int64_t h1 = std::min(hs + (g.kernel_h - 1) * g.dilation_h + 1, H);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t ws = ow * g.stride_w - g.pad_w;
          const int64_t w0 = first_on_lattice(ws, g.dilation_w, 0);
          const int64_t w1 = std::min(ws + (g.kernel_w - 1) * g.dilation_w + 1, W);
          T best = -std::numeric_limits<T>::infinity();
          int64_t at = h0 < h1 && w0 < w1 ? h0 * W + w0 : -1;  // -1: empty window
          for (int64_t h = h0; h < h1; h += g.dilation_h)
            for (int64_t w = w0; w < w1; w += g.dilation_w) {
              const T v = in[h * W + w];
              if (better(v, best)) best = v, at = h * W + w;
            }
          o[oh * OW + ow] = best;
          ix[oh * OW + ow] = at;
        }
      }
    }
  });
}

template <typename T>
void max_pool2d_backward(const PoolGeometry& g, const T* grad_out, const int64_t* indices,
                         T* grad_input) {
  const int64_t HW = g.height * g.width, OHW = g.out_h * g.out_w;
  for_planes(g, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gi = grad_input + p * HW;
      std::fill(gi, gi + HW, T(0));
      const T* go = grad_out + p * OHW;
      const int64_t* ix = indices + p * OHW;
      for (int64_t i = 0; i < OHW; ++i)
        if (ix[i] >= 0 && ix[i] < HW) gi[ix[i]] += go[i];
    }
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

}  // namespace cpu
}  // namespace loom
