// The CUDA batch norm's tiling and partial-sum arithmetic
// (tensor/cuda/BatchNormPlan.h), checked on the CPU: every plan's tiles cover
// each (row, position) of a channel exactly once, fill the GPU on ResNet-50's
// shapes and keep small inputs in one tile; and the statistics rebuilt the
// kernels' way (per-tile shifted sums, tiles combined in order) equal the
// two-pass statistics in double (the mean to the last bit) and the CPU
// kernels' -- the oracle the GPU is compared with -- within their rounding,
// on data far from zero (mean 1000, spread 0.01), forward and backward,
// float32 and float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "tensor/cuda/BatchNormPlan.h"
#include "tensor/native/Normalization.h"
#include "tests/TestUtil.h"

namespace loom {
namespace cuda {
namespace {

using native::BatchNormShape;

const int kSmCounts[] = {1, 16, 114, 132};

std::vector<BatchNormShape> shapes() {
  return {{128, 64, 112 * 112}, {128, 256, 56 * 56}, {128, 2048, 7 * 7}, {128, 1000, 1},
          {2, 3, 5},            {1, 1, 100000},      {3, 7, 1},          {16, 64, 300},
          {1, 4, 7},            {5, 2, 33000}};
}

TEST(BatchNormPlan, TilesCoverEveryValueOnce) {
  for (const BatchNormShape& s : shapes())
    for (int sms : kSmCounts) {
      const BatchNormPlan p = plan_batch_norm(s, sms);
      EXPECT_EQ(p.threads_x * p.threads_y, kBatchNormThreads);
      EXPECT_GE(p.splits(), 1);
      EXPECT_LE(p.splits(), 65535);
      // Row ranges of the row splits and column ranges of the column splits
      // each tile [0, N) and [0, S) without gaps or overlaps, and no tile is empty.
      int64_t next_row = 0;
      for (int64_t r = 0; r < p.row_splits; ++r) {
        const BatchNormTile t = batch_norm_tile(p, s, r * p.col_splits);
        EXPECT_EQ(t.r0, next_row);
        EXPECT_GT(t.r1, t.r0);
        next_row = t.r1;
      }
      EXPECT_EQ(next_row, s.batch);
      int64_t next_col = 0;
      for (int64_t c = 0; c < p.col_splits; ++c) {
        const BatchNormTile t = batch_norm_tile(p, s, c);
        EXPECT_EQ(t.s0, next_col);
        EXPECT_GT(t.s1, t.s0);
        next_col = t.s1;
      }
      EXPECT_EQ(next_col, s.spatial);
    }
}

TEST(BatchNormPlan, FillsTheGpuOnLargeChannelsAndKeepsSmallOnesWhole) {
  // ResNet-50 at batch 128 on an H100 (132 SMs): at least 2 blocks per SM.
  for (const BatchNormShape& s : {BatchNormShape{128, 64, 112 * 112}, BatchNormShape{128, 256, 56 * 56}}) {
    const BatchNormPlan p = plan_batch_norm(s, 132);
    EXPECT_GE(p.splits() * s.channels, 2 * 132) << s.channels;
  }
  // Spatial run of 49: 64 x-threads (one partly idle), 4 rows at a time.
  const BatchNormPlan p49 = plan_batch_norm({128, 2048, 49}, 132);
  EXPECT_EQ(p49.threads_x, 64);
  EXPECT_EQ(p49.splits(), 1);  // 2048 channels fill the GPU already
  // (N, C) input: one value per row, every thread on its own row.
  EXPECT_EQ(plan_batch_norm({128, 1000, 1}, 132).threads_x, 1);
  // Fewer values than two tiles' worth: one tile per channel.
  EXPECT_EQ(plan_batch_norm({16, 64, 300}, 132).splits(), 1);
  EXPECT_EQ(plan_batch_norm({2, 3, 5}, 132).splits(), 1);
  // One image, one long channel: the run itself is cut.
  const BatchNormPlan one = plan_batch_norm({1, 1, 100000}, 132);
  EXPECT_EQ(one.row_splits, 1);
  EXPECT_GT(one.col_splits, 1);
}

// The forward statistics and backward sums of channel c as the kernels form
// them: per tile in order, then the tiles in order.
template <typename T>
struct KernelSums {
  std::vector<T> mean, invstd;
  std::vector<double> sum_dy, sum_dy_xmu;
};

// Sums of the pairs f(offset) over channel c: each tile's values in order,
// then the tiles in order, as the kernels combine them.
template <typename F>
std::pair<double, double> tiled_sums(const BatchNormShape& s, const BatchNormPlan& p, int64_t c,
                                     const F& f) {
  double a = 0, b = 0;
  for (int64_t t = 0; t < p.splits(); ++t) {
    const BatchNormTile tile = batch_norm_tile(p, s, t);
    double ta = 0, tb = 0;
    for (int64_t r = tile.r0; r < tile.r1; ++r)
      for (int64_t i = tile.s0; i < tile.s1; ++i) {
        const auto [va, vb] = f((r * s.channels + c) * s.spatial + i);
        ta += va;
        tb += vb;
      }
    a += ta;
    b += tb;
  }
  return {a, b};
}

// The backward uses `saved_mean` (the forward's), as the kernels do.
template <typename T>
KernelSums<T> kernel_sums(const BatchNormShape& s, const BatchNormPlan& p, const T* x,
                          const T* dy, const T* saved_mean, double eps) {
  KernelSums<T> out;
  for (int64_t c = 0; c < s.channels; ++c) {
    const double shift = static_cast<double>(x[c * s.spatial]);
    const auto [s1, s2] = tiled_sums(s, p, c, [&](int64_t off) {
      const double d = static_cast<double>(x[off]) - shift;
      return std::make_pair(d, d * d);
    });
    const double n = static_cast<double>(s.batch * s.spatial);
    const T m = static_cast<T>(shift + s1 / n);
    const double v = squared_deviations(s1, s2, n, shift, static_cast<double>(m)) / n;
    out.mean.push_back(m);
    out.invstd.push_back(static_cast<T>(1.0 / std::sqrt(v + eps)));
    const T sm = saved_mean[c];
    const auto [g1, g2] = tiled_sums(s, p, c, [&](int64_t off) {
      const double g = static_cast<double>(dy[off]);
      return std::make_pair(g, g * static_cast<double>(x[off] - sm));
    });
    out.sum_dy.push_back(g1);
    out.sum_dy_xmu.push_back(g2);
  }
  return out;
}

// The statistics in exact arithmetic's stead: the CPU kernels' two passes
// (mean rounded to T, then the squared deviations from it) with every sum in
// double, in order.  The CPU kernels themselves sum each row in T (SIMD
// lanes), so they are within T's rounding of this, not equal to it.
template <typename T>
void reference(const BatchNormShape& s, const T* x, int64_t c, double eps, T* mean, T* invstd) {
  const int64_t C = s.channels, S = s.spatial;
  const double n = static_cast<double>(s.batch * S);
  double sum = 0;
  for (int64_t r = 0; r < s.batch; ++r)
    for (int64_t i = 0; i < S; ++i) sum += static_cast<double>(x[(r * C + c) * S + i]);
  *mean = static_cast<T>(sum / n);
  double sq = 0;
  for (int64_t r = 0; r < s.batch; ++r)
    for (int64_t i = 0; i < S; ++i) {
      const double d = static_cast<double>(x[(r * C + c) * S + i]) - static_cast<double>(*mean);
      sq += d * d;
    }
  *invstd = static_cast<T>(1.0 / std::sqrt(sq / n + eps));
}

template <typename T>
void check_against_cpu(DType dtype, const BatchNormShape& s, int sms) {
  Generator gen(11);
  const Tensor x = randn({s.batch, s.channels, s.spatial}, dtype, &gen) * 0.01 + 1000.0;
  const Tensor dy = randn({s.batch, s.channels, s.spatial}, dtype, &gen);
  const double eps = 1e-5;
  const auto [y, save_mean, save_invstd] =
      native::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, eps);
  Tensor gi, gw, gb;
  native::batch_norm_backward(dy, x, Tensor(), save_mean, save_invstd, true, false, true, true,
                              gi, gw, gb);
  const BatchNormPlan p = plan_batch_norm(s, sms);
  const T* xp = static_cast<const T*>(x.data_ptr());
  const T* cm = static_cast<const T*>(save_mean.data_ptr());
  const KernelSums<T> k =
      kernel_sums<T>(s, p, xp, static_cast<const T*>(dy.data_ptr()), cm, eps);
  const T* ci = static_cast<const T*>(save_invstd.data_ptr());
  const T* cw = static_cast<const T*>(gw.data_ptr());
  const T* cb = static_cast<const T*>(gb.data_ptr());
  // Against the double reference: float32 data to the last bit for the mean
  // (its double sums are exact) and 4 ulps for 1/std; float64 data within
  // the reference's own rounding (a sum of 10^5 values near 1000 in double
  // is good to about 1e-14 relative; the shifted sums are the closer ones).
  const double tol = dtype == kFloat32 ? 4 * 1.2e-7 : 1e-13;
  // Against the CPU kernels: within their row sums' rounding in T.
  const double cpu_rel = dtype == kFloat32 ? 1e-4 : 1e-9;
  for (int64_t c = 0; c < s.channels; ++c) {
    const std::string where = "channel " + std::to_string(c) + " of " +
                              std::to_string(s.channels) + ", " +
                              std::to_string(p.splits()) + " tiles";
    T ref_mean, ref_invstd;
    reference<T>(s, xp, c, eps, &ref_mean, &ref_invstd);
    if (dtype == kFloat32) {
      EXPECT_EQ(k.mean[c], ref_mean) << where;
    }
    EXPECT_NEAR(k.mean[c], ref_mean, tol * std::abs(ref_mean)) << where;
    EXPECT_NEAR(k.invstd[c], ref_invstd, tol * std::abs(ref_invstd)) << where;
    EXPECT_NEAR(k.mean[c], cm[c], cpu_rel * std::abs(cm[c])) << where;
    EXPECT_NEAR(k.invstd[c], ci[c], cpu_rel * 10 * std::abs(ci[c])) << where;
    const double grad_weight = k.sum_dy_xmu[c] * static_cast<double>(ci[c]);
    EXPECT_NEAR(grad_weight, cw[c], cpu_rel * 100 * (1 + std::abs(cw[c]))) << where;
    EXPECT_NEAR(k.sum_dy[c], cb[c], cpu_rel * 100 * (1 + std::abs(cb[c]))) << where;
  }
}

TEST(BatchNormPlan, KernelArithmeticGivesTheCpuStatistics) {
  const std::vector<BatchNormShape> cases = {{8, 3, 4000}, {3, 2, 20000}, {64, 4, 9}, {2, 1, 70000}};
  int cut = 0;
  for (const BatchNormShape& s : cases)
    for (int sms : {1, 132}) {
      cut += plan_batch_norm(s, sms).splits() > 1;
      check_against_cpu<float>(kFloat32, s, sms);
      check_against_cpu<double>(kFloat64, s, sms);
    }
  EXPECT_GE(cut, 3) << "the cases should exercise plans of several tiles";
}

}  // namespace
}  // namespace cuda
}  // namespace loom
