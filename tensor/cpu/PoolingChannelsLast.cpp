// Max pooling over channels-last tensors (Pooling.h): each output pixel's
// window is walked tap by tap, and every tap is a row of C channels compared
// with the running maxima in one vectorised loop.  Results, indices and
// gradients are the planar kernels': the same taps in the same order, NaN
// wins, indices flat h * W + w within each plane.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensor/Half.h"
#include "tensor/Parallel.h"
#include "tensor/cpu/Bfloat16Runs.h"
#include "tensor/cpu/PoolWindow.h"
#include "tensor/cpu/Pooling.h"

namespace loom {
namespace cpu {
namespace {

// Channels compared at a time (bfloat16 taps are widened this many values
// at a time into a stack buffer).
constexpr int64_t kColumns = 256;

// What a tap's values are compared in: float for bfloat16, else T.
template <typename T>
using Compare = std::conditional_t<std::is_same_v<T, BFloat16>, float, T>;

}  // namespace

template <typename T>
void max_pool2d_forward_channels_last(const PoolGeometry& g, const T* input, T* out,
                                      int64_t* indices) {
  using V = Compare<T>;
  const int64_t C = g.channels, H = g.height, W = g.width, OH = g.out_h, OW = g.out_w;
  const int64_t batch = C > 0 ? g.planes / C : 0;
  // One task per output row of one image.
  parallel_for(0, batch * OH, 1, [&](int64_t r0, int64_t r1) {
    V best[kColumns], buf[kColumns];
    int64_t at[kColumns];
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / OH, oh = r % OH;
      const auto [h0, h1] =
          window_taps(oh * g.stride_h - g.pad_h, g.kernel_h, g.dilation_h, H);
      const T* image = input + n * H * W * C;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const auto [w0, w1] =
            window_taps(ow * g.stride_w - g.pad_w, g.kernel_w, g.dilation_w, W);
        const int64_t first = h0 < h1 && w0 < w1 ? h0 * W + w0 : -1;  // -1: empty window
        const int64_t o = ((n * OH + oh) * OW + ow) * C;
        for (int64_t c0 = 0; c0 < C; c0 += kColumns) {
          const int64_t len = std::min(kColumns, C - c0);
          std::fill(best, best + len, -std::numeric_limits<V>::infinity());
          std::fill(at, at + len, first);
          for (int64_t h = h0; h < h1; h += g.dilation_h)
            for (int64_t w = w0; w < w1; w += g.dilation_w) {
              const V* v = load_run<V>(image + (h * W + w) * C + c0, len, buf);
              const int64_t tap = h * W + w;
#pragma omp simd
              for (int64_t c = 0; c < len; ++c) take_max(v[c], tap, best[c], at[c]);
            }
          store_run<V>(best, len, out + o + c0);
          std::copy(at, at + len, indices + o + c0);
        }
      }
    }
  });
}

template <typename T>
void max_pool2d_backward_channels_last(const PoolGeometry& g, const T* grad_out,
                                       const int64_t* indices, T* grad_input) {
  using V = Compare<T>;
  const int64_t C = g.channels, HW = g.height * g.width, OHW = g.out_h * g.out_w;
  const int64_t batch = C > 0 ? g.planes / C : 0;
  // One task per image: its outputs scatter only into its own input.  The
  // gradient of an image accumulates in V (float32 for bfloat16, rounded once).
  parallel_for(0, batch, 1, [&](int64_t n0, int64_t n1) {
    std::vector<V> acc;
    for (int64_t n = n0; n < n1; ++n) {
      V* gi;
      if constexpr (std::is_same_v<T, V>) {
        gi = grad_input + n * HW * C;
      } else {
        acc.resize(static_cast<size_t>(HW * C));
        gi = acc.data();
      }
      std::fill(gi, gi + HW * C, V(0));
      const T* go = grad_out + n * OHW * C;
      const int64_t* ix = indices + n * OHW * C;
      for (int64_t i = 0; i < OHW; ++i)
        for (int64_t c = 0; c < C; ++c) {
          const int64_t from = ix[i * C + c];
          if (from >= 0 && from < HW) gi[from * C + c] += static_cast<V>(go[i * C + c]);
        }
      if constexpr (!std::is_same_v<T, V>) store_run<V>(gi, HW * C, grad_input + n * HW * C);
    }
  });
}

template void max_pool2d_forward_channels_last<float>(const PoolGeometry&, const float*, float*,
                                                      int64_t*);
template void max_pool2d_forward_channels_last<double>(const PoolGeometry&, const double*,
                                                       double*, int64_t*);
template void max_pool2d_forward_channels_last<BFloat16>(const PoolGeometry&, const BFloat16*,
                                                         BFloat16*, int64_t*);
template void max_pool2d_backward_channels_last<float>(const PoolGeometry&, const float*,
                                                       const int64_t*, float*);
template void max_pool2d_backward_channels_last<double>(const PoolGeometry&, const double*,
                                                        const int64_t*, double*);
template void max_pool2d_backward_channels_last<BFloat16>(const PoolGeometry&, const BFloat16*,
                                                          const int64_t*, BFloat16*);

}  // namespace cpu
}  // namespace loom
