// The gather ranges of the CUDA pooling backwards (tensor/cuda/PoolingIndex.h),
// no GPU needed: for every small geometry, each output whose window (the CPU
// kernels' definition, tensor/cpu/Pooling.cpp and PoolWindow.h) contains an
// input position lies in that position's range, and ranges stay inside
// [0, out).  A range that left one out would silently drop a gradient term
// on the GPU.
#include <algorithm>

#include "tensor/cpu/PoolWindow.h"
#include "tensor/cuda/IntDivider.h"
#include "tensor/cuda/PoolingIndex.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using cuda::OutputRange;

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// native/Pooling.cpp's output size.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, bool ceil_mode,
                    int64_t dilation = 1) {
  int64_t out =
      floor_div(in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// n / d by plain division, as the kernels' 64-bit path does.
struct Divide {
  int64_t d;
  int64_t div(int64_t n) const { return n / d; }
};

TEST(PoolingIndex, AvgPoolRangesCoverEveryWindow) {
  int checked = 0;
  for (int64_t in = 1; in <= 12; ++in)
    for (int64_t k = 1; k <= 5; ++k)
      for (int64_t stride = 1; stride <= 4; ++stride)
        for (int64_t pad = 0; pad <= k / 2; ++pad)
          for (bool ceil_mode : {false, true}) {
            const int64_t out = pooled_size(in, k, pad, stride, ceil_mode);
            if (out < 1) continue;
            for (int64_t o = 0; o < out; ++o) {
              // The CPU's clipped window of output o (avg_window).
              const int64_t s = o * stride - pad;
              const int64_t e = std::min(s + k, in + pad);
              for (int64_t i = std::max<int64_t>(s, 0); i < std::min(e, in); ++i) {
                const OutputRange r = cuda::avg_pool_outputs_covering(i, pad, k, stride, out);
                EXPECT_TRUE(r.begin <= o && o < r.end)
                    << "in " << in << " k " << k << " stride " << stride << " pad " << pad
                    << (ceil_mode ? " ceil" : "") << ": output " << o << " not in the range ["
                    << r.begin << ", " << r.end << ") of input " << i;
                ++checked;
              }
            }
            for (int64_t i = 0; i < in; ++i) {
              const OutputRange r = cuda::avg_pool_outputs_covering(i, pad, k, stride, out);
              EXPECT_GE(r.begin, 0);
              EXPECT_LE(r.end, out);
              EXPECT_LE(r.begin, r.end);
              EXPECT_LE(r.end - r.begin, (k + stride - 1) / stride);  // only a few windows each
            }
          }
  EXPECT_GT(checked, 5000);  // the loops really ran
}

// Every tap of every max-pool window (padding, dilation, ceil_mode) lies in
// its position's range, with 64-bit division and with the kernels'
// IntDivider in 32 bits alike; ranges stay short.
TEST(PoolingIndex, MaxPoolRangesCoverEveryTap) {
  int checked = 0;
  for (int64_t in = 1; in <= 12; ++in)
    for (int64_t k = 1; k <= 5; ++k)
      for (int64_t stride = 1; stride <= 4; ++stride)
        for (int64_t dilation = 1; dilation <= 3; ++dilation)
          for (int64_t pad = 0; pad <= k / 2; ++pad)
            for (bool ceil_mode : {false, true}) {
              const int64_t out = pooled_size(in, k, pad, stride, ceil_mode, dilation);
              if (out < 1) continue;
              const int64_t span = (k - 1) * dilation + 1;
              const auto range = [&](int64_t i) {
                const cuda::IndexRange<int64_t> wide =
                    cuda::max_pool_outputs_covering<int64_t>(i, pad, span, out, Divide{stride});
                const cuda::IndexRange<uint32_t> narrow = cuda::max_pool_outputs_covering<uint32_t>(
                    static_cast<uint32_t>(i), static_cast<uint32_t>(pad),
                    static_cast<uint32_t>(span), static_cast<uint32_t>(out),
                    cuda::IntDivider(static_cast<uint32_t>(stride)));
                EXPECT_EQ(wide.begin, static_cast<int64_t>(narrow.begin));
                EXPECT_EQ(wide.end, static_cast<int64_t>(narrow.end));
                return wide;
              };
              for (int64_t o = 0; o < out; ++o) {
                // The CPU's taps of output o (window_taps).
                const cpu::WindowTaps taps = cpu::window_taps(o * stride - pad, k, dilation, in);
                for (int64_t i = taps.begin; i < taps.end; i += dilation) {
                  const cuda::IndexRange<int64_t> r = range(i);
                  EXPECT_TRUE(r.begin <= o && o < r.end)
                      << "in " << in << " k " << k << " stride " << stride << " dilation "
                      << dilation << " pad " << pad << (ceil_mode ? " ceil" : "") << ": output "
                      << o << " not in the range [" << r.begin << ", " << r.end << ") of input "
                      << i;
                  ++checked;
                }
              }
              for (int64_t i = 0; i < in; ++i) {
                const cuda::IndexRange<int64_t> r = range(i);
                EXPECT_GE(r.begin, 0);
                EXPECT_LE(r.end, out);
                EXPECT_LE(r.begin, r.end);
                EXPECT_LE(r.end - r.begin, (span + stride - 1) / stride);
              }
            }
  EXPECT_GT(checked, 10000);  // the loops really ran
}

TEST(PoolingIndex, AdaptiveRangesAreExactlyTheCoveringWindows) {
  for (int64_t in = 1; in <= 15; ++in)
    for (int64_t out = 0; out <= 17; ++out)
      for (int64_t i = 0; i < in; ++i) {
        const OutputRange r = cuda::adaptive_outputs_covering(i, in, out);
        EXPECT_GE(r.begin, 0);
        EXPECT_LE(r.end, out);
        for (int64_t o = 0; o < out; ++o) {
          // tensor/cpu/Pooling.cpp's adaptive window of output o.
          const int64_t s = (o * in) / out, e = ((o + 1) * in + out - 1) / out;
          const bool covers = s <= i && i < e;
          EXPECT_EQ(covers, r.begin <= o && o < r.end)
              << "in " << in << " out " << out << " input " << i << " output " << o;
        }
      }
}

}  // namespace
}  // namespace loom
