// The channels-last CUDA batch norm's grid (tensor/cuda/BatchNormChannelsLastPlan.h),
// checked on the CPU: every plan's row splits and channel tiles cover each
// row and channel exactly once with blocks of 256 threads whose x threads
// take neighbouring channels; ResNet-50's shapes at batch 256 fill an H100
// (and get the vectorised, warp-wide rows); small inputs keep one split; the
// scratch holds the splits of either vector width.  And the statistics
// rebuilt the kernels' way (each thread's rows, the block's rows of threads
// in order, the splits in order) equal the two-pass statistics in double
// (the float32 mean to the last bit) and the CPU's channels-last kernels
// within their rounding, on data far from zero (mean 1000, spread 0.01),
// forward and backward, float32 and float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tensor/cuda/BatchNormChannelsLastPlan.h"
#include "tensor/native/Normalization.h"
#include "tests/TestUtil.h"

namespace loom {
namespace cuda {
namespace {

using native::BatchNormShape;

const int kSmCounts[] = {1, 16, 114, 132};

// (batch, channels, spatial) with channels_last set.
BatchNormShape nhwc(int64_t n, int64_t c, int64_t s) {
  BatchNormShape shape{n, c, s};
  shape.channels_last = true;
  return shape;
}

std::vector<BatchNormShape> shapes() {
  return {nhwc(256, 64, 112 * 112), nhwc(256, 256, 56 * 56), nhwc(256, 2048, 7 * 7),
          nhwc(256, 512, 28 * 28),  nhwc(2, 3, 30),          nhwc(4, 37, 15),
          nhwc(64, 1, 4096),        nhwc(9, 5, 1),           nhwc(1, 8, 9),
          nhwc(16, 4, 4096),        nhwc(3, 2048, 6),        nhwc(2, 100000, 1)};
}

std::string str(const BatchNormShape& s, int sms, int vec) {
  return "[" + std::to_string(s.batch) + ", " + std::to_string(s.channels) + ", " +
         std::to_string(s.spatial) + "] on " + std::to_string(sms) + " SMs, vec " +
         std::to_string(vec);
}

TEST(BatchNormChannelsLastPlan, SplitsAndTilesCoverEveryValueOnce) {
  for (const BatchNormShape& s : shapes())
    for (int sms : kSmCounts)
      for (int vec : {1, batch_norm_channels_last_vec(s)}) {
        SCOPED_TRACE(str(s, sms, vec));
        const BatchNormChannelsLastPlan p = plan_batch_norm_channels_last(s, sms, vec);
        const int64_t M = s.batch * s.spatial, C = s.channels;
        EXPECT_EQ(p.vec, vec);
        EXPECT_EQ(p.threads_x * p.threads_y, kBatchNormThreads);
        EXPECT_LE(p.threads_x, 32);
        EXPECT_EQ(p.tile_channels, p.threads_x * vec);
        // The tiles cover [0, C), none empty; the splits cover [0, M), none empty.
        EXPECT_GE(p.channel_tiles * p.tile_channels, C);
        EXPECT_LT((p.channel_tiles - 1) * p.tile_channels, C);
        EXPECT_GE(p.row_splits * p.rows_per_split, M);
        EXPECT_LT((p.row_splits - 1) * p.rows_per_split, M);
        EXPECT_GE(p.row_splits, 1);
        EXPECT_LE(p.row_splits, 4 * sms);  // a grid dimension and the scratch stay small
        EXPECT_LE(p.row_splits, batch_norm_channels_last_max_splits(s, sms));
        // The elementwise grid: at least a block, no block without a row.
        EXPECT_GE(p.apply_row_blocks, 1);
        EXPECT_LT((p.apply_row_blocks - 1) * p.threads_y, M);
        // No x thread is idle where the row has channels for it.
        EXPECT_TRUE(p.threads_x == 1 || (p.threads_x / 2) * vec < C);
      }
}

TEST(BatchNormChannelsLastPlan, FillsTheGpuOnResNetShapesAndKeepsSmallOnesWhole) {
  // ResNet-50 at batch 256 on an H100 (132 SMs): the statistics grid has at
  // least 2 blocks per SM, the apply grid at least 4.
  for (const BatchNormShape& s : {nhwc(256, 64, 112 * 112), nhwc(256, 256, 56 * 56),
                                  nhwc(256, 512, 28 * 28), nhwc(256, 2048, 7 * 7)}) {
    SCOPED_TRACE(str(s, 132, 4));
    EXPECT_EQ(batch_norm_channels_last_vec(s), 4);
    const BatchNormChannelsLastPlan p = plan_batch_norm_channels_last(s, 132, 4);
    EXPECT_GE(p.row_splits * p.channel_tiles, 2 * 132);
    EXPECT_GE(p.apply_row_blocks * p.channel_tiles, 4 * 132);
  }
  // 64 channels: 16 threads of 4 channels take a row (256 bytes of float32),
  // 16 rows at a time; one tile.
  const BatchNormChannelsLastPlan p64 =
      plan_batch_norm_channels_last(nhwc(256, 64, 12544), 132, 4);
  EXPECT_EQ(p64.threads_x, 16);
  EXPECT_EQ(p64.channel_tiles, 1);
  // 2048 channels: a warp of 4 channels each, 16 tiles of 128 channels.
  const BatchNormChannelsLastPlan p2048 =
      plan_batch_norm_channels_last(nhwc(256, 2048, 49), 132, 4);
  EXPECT_EQ(p2048.threads_x, 32);
  EXPECT_EQ(p2048.channel_tiles, 16);
  // Odd channel counts take one channel per thread.
  EXPECT_EQ(batch_norm_channels_last_vec(nhwc(4, 37, 15)), 1);
  EXPECT_EQ(batch_norm_channels_last_vec(nhwc(4, 3, 15)), 1);
  EXPECT_EQ(plan_batch_norm_channels_last(nhwc(4, 3, 15), 132, 1).threads_x, 4);
  // Fewer values than two blocks' worth: one split.
  EXPECT_EQ(plan_batch_norm_channels_last(nhwc(8, 64, 16), 132, 4).row_splits, 1);
  EXPECT_EQ(plan_batch_norm_channels_last(nhwc(2, 3, 30), 132, 1).row_splits, 1);
  // One channel of many rows: the rows are cut.
  EXPECT_GT(plan_batch_norm_channels_last(nhwc(64, 1, 4096), 132, 1).row_splits, 1);
}

// Sums of the pairs f(row, c) over column c as the kernels form them: each
// thread (x, y) of the block of split i sums rows r0 + y, r0 + y + threads_y,
// ...; the block adds its threads' sums in y order; the splits are added in
// order.
template <typename F>
std::pair<double, double> kernel_column_sums(const BatchNormShape& s,
                                             const BatchNormChannelsLastPlan& p, int64_t c,
                                             const F& f) {
  const int64_t M = s.batch * s.spatial;
  double a = 0, b = 0;
  for (int64_t split = 0; split < p.row_splits; ++split) {
    const int64_t r0 = split * p.rows_per_split;
    const int64_t r1 = std::min(M, r0 + p.rows_per_split);
    double block_a = 0, block_b = 0;
    for (int y = 0; y < p.threads_y; ++y) {
      double ta = 0, tb = 0;
      for (int64_t r = r0 + y; r < r1; r += p.threads_y) {
        const auto [va, vb] = f(r, c);
        ta += va;
        tb += vb;
      }
      block_a += ta;
      block_b += tb;
    }
    a += block_a;
    b += block_b;
  }
  return {a, b};
}

template <typename T>
void check_against_cpu(DType dtype, const BatchNormShape& s, int sms) {
  const int64_t C = s.channels, M = s.batch * s.spatial;
  Generator gen(11);
  // (N, C, H, W) channels last, H * W = spatial: memory is (M, C).
  const Tensor x = (randn({s.batch, C, s.spatial, 1}, dtype, &gen) * 0.01 + 1000.0)
                       .contiguous(MemoryFormat::kChannelsLast);
  const Tensor dy = randn({s.batch, C, s.spatial, 1}, dtype, &gen)
                        .contiguous(MemoryFormat::kChannelsLast);
  const double eps = 1e-5;
  const auto [y, save_mean, save_invstd] =
      native::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, eps);
  Tensor gi, gw, gb;
  native::batch_norm_backward(dy, x, Tensor(), save_mean, save_invstd, true, false, true, true,
                              gi, gw, gb);
  const BatchNormChannelsLastPlan p =
      plan_batch_norm_channels_last(s, sms, batch_norm_channels_last_vec(s));
  const T* xp = static_cast<const T*>(x.data_ptr());
  const T* dyp = static_cast<const T*>(dy.data_ptr());
  const T* cm = static_cast<const T*>(save_mean.data_ptr());
  const T* ci = static_cast<const T*>(save_invstd.data_ptr());
  const T* cw = static_cast<const T*>(gw.data_ptr());
  const T* cb = static_cast<const T*>(gb.data_ptr());
  const double n = static_cast<double>(M);
  // As check_against_cpu of cuda_batch_norm_plan_test: the double reference
  // to the last bit of a float32 mean and 4 ulps of 1/std; the CPU kernels
  // within their float32 row-block sums.
  const double tol = dtype == kFloat32 ? 4 * 1.2e-7 : 1e-13;
  const double cpu_rel = dtype == kFloat32 ? 1e-4 : 1e-9;
  for (int64_t c = 0; c < C; ++c) {
    SCOPED_TRACE("channel " + std::to_string(c) + ", " + std::to_string(p.row_splits) +
                 " splits");
    const double shift = static_cast<double>(xp[c]);
    const auto [s1, s2] = kernel_column_sums(s, p, c, [&](int64_t r, int64_t col) {
      const double d = static_cast<double>(xp[r * C + col]) - shift;
      return std::make_pair(d, d * d);
    });
    const T m = static_cast<T>(shift + s1 / n);
    const double v = squared_deviations(s1, s2, n, shift, static_cast<double>(m)) / n;
    const T is = static_cast<T>(1.0 / std::sqrt(v + eps));
    // The double reference: mean rounded to T, then squared deviations from it.
    double sum = 0, sq = 0;
    for (int64_t r = 0; r < M; ++r) sum += static_cast<double>(xp[r * C + c]);
    const T ref_mean = static_cast<T>(sum / n);
    for (int64_t r = 0; r < M; ++r) {
      const double d = static_cast<double>(xp[r * C + c]) - static_cast<double>(ref_mean);
      sq += d * d;
    }
    const T ref_invstd = static_cast<T>(1.0 / std::sqrt(sq / n + eps));
    if (dtype == kFloat32) {
      EXPECT_EQ(m, ref_mean);
    }
    EXPECT_NEAR(m, ref_mean, tol * std::abs(ref_mean));
    EXPECT_NEAR(is, ref_invstd, tol * std::abs(ref_invstd));
    EXPECT_NEAR(m, cm[c], cpu_rel * std::abs(cm[c]));
    EXPECT_NEAR(is, ci[c], cpu_rel * 10 * std::abs(ci[c]));
    const T sm = cm[c];
    const auto [g1, g2] = kernel_column_sums(s, p, c, [&](int64_t r, int64_t col) {
      const double g = static_cast<double>(dyp[r * C + col]);
      return std::make_pair(g, g * static_cast<double>(xp[r * C + col] - sm));
    });
    EXPECT_NEAR(g2 * static_cast<double>(ci[c]), cw[c], cpu_rel * 100 * (1 + std::abs(cw[c])));
    EXPECT_NEAR(g1, cb[c], cpu_rel * 100 * (1 + std::abs(cb[c])));
  }
}

TEST(BatchNormChannelsLastPlan, KernelArithmeticGivesTheCpuStatistics) {
  const std::vector<BatchNormShape> cases = {nhwc(8, 4, 4000), nhwc(3, 3, 20000),
                                             nhwc(64, 8, 9), nhwc(2, 1, 70000),
                                             nhwc(4, 64, 600)};
  int cut = 0;
  for (const BatchNormShape& s : cases)
    for (int sms : {1, 132}) {
      SCOPED_TRACE(str(s, sms, batch_norm_channels_last_vec(s)));
      cut += plan_batch_norm_channels_last(s, sms, batch_norm_channels_last_vec(s)).row_splits > 1;
      check_against_cpu<float>(kFloat32, s, sms);
      check_against_cpu<double>(kFloat64, s, sms);
    }
  EXPECT_GE(cut, 3) << "the cases should exercise plans of several splits";
}

}  // namespace
}  // namespace cuda
}  // namespace loom
