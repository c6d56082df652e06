// CPU softmax/log_softmax over a contiguous (outer, D, inner) block.
//
// inner == 1 (softmax over the last dim, the common case): one contiguous row
// per output row, parallel over rows.  inner > 1: rows of `inner` values are
// walked D times per tile with per-lane running max and sum, so memory is read
// in order.  Sums accumulate in double; exp is cpu::fast_exp, so every loop
// vectorises.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/cpu/FastExp.h"
#include "tensor/native/Softmax.h"

namespace loom {
namespace cpu {

namespace {

constexpr int64_t kGrain = 16384;  // values per thread, at least
constexpr int64_t kTile = 256;     // lanes per tile when inner > 1

// Calls fn(a, k0, n) for tiles of n <= kTile lanes starting at lane k0 of
// outer row a, in parallel.
template <typename Fn>
void for_each_tile(int64_t outer, int64_t D, int64_t inner, const Fn& fn) {
  const int64_t tiles = (inner + kTile - 1) / kTile;
  const int64_t work = std::max<int64_t>(D, 1) * std::min(inner, kTile);
  parallel_for(0, outer * tiles, std::max<int64_t>(1, kGrain / work), [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t a = u / tiles, k0 = (u % tiles) * kTile;
      fn(a, k0, std::min(inner - k0, kTile));
    }
  });
}

template <typename T>
void softmax_rows(T* out, const T* x, int64_t outer, int64_t D, bool log) {
  parallel_for(0, outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(D, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t a = b; a < e; ++a) {
                   const T* xr = x + a * D;
                   T* yr = out + a * D;
                   T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
                   for (int64_t j = 0; j < D; ++j) m = xr[j] > m ? xr[j] : m;
                   double s = 0;
                   if (log) {
#pragma omp simd reduction(+ : s)
                     for (int64_t j = 0; j < D; ++j) s += fast_exp(xr[j] - m);
                     // (x - m) - log(s) keeps precision that x - (m + log(s)) loses.
                     const T log_s = static_cast<T>(std::log(s));
#pragma omp simd
                     for (int64_t j = 0; j < D; ++j) yr[j] = (xr[j] - m) - log_s;
                   } else {
#pragma omp simd reduction(+ : s)
                     for (int64_t j = 0; j < D; ++j) {
                       const T e = fast_exp(xr[j] - m);
                       yr[j] = e;
                       s += e;
                     }
                     const T inv = static_cast<T>(1.0 / s);
#pragma omp simd
                     for (int64_t j = 0; j < D; ++j) yr[j] *= inv;
                   }
                 }
               });
}

template <typename T>
void softmax_lanes(T* out, const T* x, int64_t outer, int64_t D, int64_t inner, bool log) {
  for_each_tile(outer, D, inner, [&](int64_t a, int64_t k0, int64_t n) {
    T m[kTile];       // running max per lane
    double s[kTile];  // sum of exp(x - m) per lane
    const T* xb = x + a * D * inner + k0;
    T* yb = out + a * D * inner + k0;
    std::fill(m, m + n, -std::numeric_limits<T>::infinity());
    std::fill(s, s + n, 0.0);
    for (int64_t j = 0; j < D; ++j) {
      const T* xj = xb + j * inner;
#pragma omp simd
      for (int64_t k = 0; k < n; ++k) m[k] = xj[k] > m[k] ? xj[k] : m[k];
    }
    for (int64_t j = 0; j < D; ++j) {
      const T* xj = xb + j * inner;
      T* yj = yb + j * inner;
      if (log) {
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) s[k] += fast_exp(xj[k] - m[k]);
      } else {
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) {
          yj[k] = fast_exp(xj[k] - m[k]);
          s[k] += yj[k];
        }
      }
    }
    T f[kTile];  // log(s) for log_softmax, 1 / s for softmax
    for (int64_t k = 0; k < n; ++k) f[k] = static_cast<T>(log ? std::log(s[k]) : 1.0 / s[k]);
    for (int64_t j = 0; j < D; ++j) {
      const T* xj = xb + j * inner;
      T* yj = yb + j * inner;
      if (log) {
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) yj[k] = (xj[k] - m[k]) - f[k];
      } else {
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) yj[k] *= f[k];
      }
    }
  });
}

template <typename T>
void backward_rows(T* gi, const T* g, const T* y, int64_t outer, int64_t D, bool log) {
  parallel_for(0, outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(D, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t a = b; a < e; ++a) {
                   const T* gr = g + a * D;
                   const T* yr = y + a * D;
                   T* out = gi + a * D;
                   double s = 0;
                   if (log) {
#pragma omp simd reduction(+ : s)
                     for (int64_t j = 0; j < D; ++j) s += gr[j];
                     const T st = static_cast<T>(s);
#pragma omp simd
                     for (int64_t j = 0; j < D; ++j) out[j] = gr[j] - fast_exp(yr[j]) * st;
                   } else {
#pragma omp simd reduction(+ : s)
                     for (int64_t j = 0; j < D; ++j) s += static_cast<double>(gr[j]) * yr[j];
                     const T st = static_cast<T>(s);
#pragma omp simd
                     for (int64_t j = 0; j < D; ++j) out[j] = yr[j] * (gr[j] - st);
                   }
                 }
               });
}

template <typename T>
void backward_lanes(T* gi, const T* g, const T* y, int64_t outer, int64_t D, int64_t inner,
                    bool log) {
  for_each_tile(outer, D, inner, [&](int64_t a, int64_t k0, int64_t n) {
    const int64_t base = a * D * inner + k0;
    double s[kTile];
    std::fill(s, s + n, 0.0);
    for (int64_t j = 0; j < D; ++j) {
      const T* gj = g + base + j * inner;
      const T* yj = y + base + j * inner;
#pragma omp simd
      for (int64_t k = 0; k < n; ++k)
        s[k] += log ? static_cast<double>(gj[k]) : static_cast<double>(gj[k]) * yj[k];
    }
    T st[kTile];
    for (int64_t k = 0; k < n; ++k) st[k] = static_cast<T>(s[k]);
    for (int64_t j = 0; j < D; ++j) {
      const T* gj = g + base + j * inner;
      const T* yj = y + base + j * inner;
      T* oj = gi + base + j * inner;
      if (log) {
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) oj[k] = gj[k] - fast_exp(yj[k]) * st[k];
      } else {
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) oj[k] = yj[k] * (gj[k] - st[k]);
      }
    }
  });
}

}  // namespace

void softmax_kernel(const Tensor& out, const Tensor& x, int64_t outer, int64_t D, int64_t inner,
                    bool log) {
  dispatch_floating(x.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = static_cast<T*>(out.data_ptr());
    const T* in = static_cast<const T*>(x.data_ptr());
    if (inner == 1) softmax_rows<T>(o, in, outer, D, log);
    else softmax_lanes<T>(o, in, outer, D, inner, log);
  });
}

void softmax_backward_kernel(const Tensor& grad_input, const Tensor& grad, const Tensor& output,
                             int64_t outer, int64_t D, int64_t inner, bool log) {
  dispatch_floating(output.dtype(), log ? "log_softmax_backward" : "softmax_backward",
                    [&](auto tag) {
                      using T = typename decltype(tag)::type;
                      T* gi = static_cast<T*>(grad_input.data_ptr());
                      const T* g = static_cast<const T*>(grad.data_ptr());
                      const T* y = static_cast<const T*>(output.data_ptr());
                      if (inner == 1) backward_rows<T>(gi, g, y, outer, D, log);
                      else backward_lanes<T>(gi, g, y, outer, D, inner, log);
                    });
}

static const native::RegisterKernel reg_softmax(native::softmax_stub, kCPU, &softmax_kernel);
static const native::RegisterKernel reg_softmax_backward(native::softmax_backward_stub, kCPU,
                                                         &softmax_backward_kernel);

}  // namespace cpu
}  // namespace loom
