// loom's Winograd F(2x2, 3x3) kernels (tensor/cpu/Winograd.h) against the
// direct convolution in float64: the forward and the input gradient over
// paddings 0-2, odd and even sizes, channel counts off the 8-row panels,
// rounds of tiles split across images; the transformed weights kept under
// WeightReuse, dropped when the weights change, and made ahead by
// prepare_kept_weights; and which convolutions the kernels take.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/WeightReuse.h"
#include "tensor/cpu/Convolution.h"
#include "tensor/cpu/Gemm.h"
#include "tensor/cpu/KeptWeightCopies.h"
#include "tensor/Factory.h"
#include "tensor/cpu/Winograd.h"

namespace loom {
namespace {

using native::ConvGeometry;

ConvGeometry geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t pad) {
  ConvGeometry g;
  g.batch = n;
  g.in_channels = c;
  g.height = h;
  g.width = w;
  g.out_channels = o;
  g.kernel_h = g.kernel_w = 3;
  g.pad_h = g.pad_w = pad;
  g.out_h = h + 2 * pad - 2;
  g.out_w = w + 2 * pad - 2;
  return g;
}

std::vector<float> random_floats(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(count);
  for (float& f : v) f = normal(rng);
  return v;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Largest |a - b| over the largest |b|: Winograd's error is relative to the
// outputs' magnitude, not to each output.
double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / std::max(scale, 1e-30);
}

class Winograd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::shifted_kernels_available()) GTEST_SKIP() << "needs AVX-512";
  }
};

TEST_F(Winograd, MatchesDirectConvolutionForwardAndInputGradient) {
  struct Case {
    int64_t n, c, h, w, o, pad;
  };
  const std::vector<Case> cases = {
      {4, 256, 8, 8, 256, 1},   // the split_size experiment's layer3 at a micro-batch
      {2, 16, 7, 9, 24, 1},     // odd sizes: blocks cut at the right and bottom
      {1, 17, 6, 6, 19, 0},     // no padding; channels off the 8-row panels
      {3, 20, 5, 8, 16, 2},     // padding 2
      {1, 32, 50, 46, 16, 1},   // 625 tiles: two rounds of one image each
      {130, 16, 4, 4, 16, 1},   // 4 tiles an image: rounds of 128 images, then 2
      {5, 16, 1, 1, 16, 1},     // one pixel
  };
  for (const Case& k : cases) {
    const ConvGeometry g = geometry(k.n, k.c, k.h, k.w, k.o, k.pad);
    ASSERT_TRUE(cpu::winograd_applies(g)) << "case c=" << k.c << " h=" << k.h;
    const auto x = random_floats(k.n * k.c * k.h * k.w, 1);
    const auto w = random_floats(k.o * k.c * 9, 2);
    const auto bias = random_floats(k.o, 3);
    const auto gy = random_floats(k.n * k.o * g.out_h * g.out_w, 4);

    std::vector<float> y(gy.size());
    cpu::winograd_forward(g, x.data(), w.data(), bias.data(), y.data(), {});
    std::vector<double> y_ref(gy.size());
    const auto xd = widen(x), wd = widen(w), bd = widen(bias), gyd = widen(gy);
    cpu::conv2d_forward<double>(g, xd.data(), wd.data(), bd.data(), y_ref.data());
    EXPECT_LT(relative_error(y, y_ref), 2e-6)
        << "forward n=" << k.n << " c=" << k.c << " " << k.h << "x" << k.w << " o=" << k.o
        << " pad " << k.pad;

    std::vector<float> gx(x.size());
    cpu::winograd_backward_data(g, w.data(), gy.data(), gx.data(), {});
    std::vector<double> gx_ref(x.size());
    cpu::conv2d_backward<double>(g, xd.data(), wd.data(), gyd.data(), gx_ref.data(), nullptr,
                                 nullptr);
    EXPECT_LT(relative_error(gx, gx_ref), 2e-6)
        << "input gradient n=" << k.n << " c=" << k.c << " " << k.h << "x" << k.w
        << " o=" << k.o << " pad " << k.pad;
  }
}

TEST_F(Winograd, KeepsTransformedWeightsUntilTheyChange) {
  const ConvGeometry g = geometry(2, 16, 8, 8, 16, 1);
  const auto x = random_floats(2 * 16 * 64, 5);
  auto w = random_floats(16 * 16 * 9, 6);
  std::vector<float> y(2 * 16 * 64), again(y.size());
  const auto counter = std::make_shared<int>(0);  // the weight tensor's version counter
  const WeightReuseStats before = weight_reuse_stats();
  cpu::winograd_forward(g, x.data(), w.data(), nullptr, y.data(), {counter, 1, {}});
  cpu::winograd_forward(g, x.data(), w.data(), nullptr, again.data(), {counter, 1, {}});
  const WeightReuseStats kept = weight_reuse_stats();
  EXPECT_EQ(kept.made - before.made, 1);
  EXPECT_EQ(kept.reused - before.reused, 1);
  EXPECT_EQ(y, again);

  // New weights at a new version: transformed again, not served stale.
  for (float& f : w) f *= -2.f;
  cpu::winograd_forward(g, x.data(), w.data(), nullptr, again.data(), {counter, 2, {}});
  EXPECT_EQ(weight_reuse_stats().made - kept.made, 1);
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(again[i], -2.f * y[i], 1e-4f * (1 + std::abs(y[i])));
  // The input gradient keeps a transform of its own (the filters turned).
  std::vector<float> gx(x.size());
  cpu::winograd_backward_data(g, w.data(), y.data(), gx.data(), {counter, 2, {}});
  EXPECT_EQ(weight_reuse_stats().made - kept.made, 2);
}

// prepare_kept_weights makes the transforms of changed weights ahead of
// the passes, only of the passes that read them before, only while the
// tensor lives, and only for its device.
TEST_F(Winograd, PreparesTheTransformsOfChangedWeights) {
  const ConvGeometry g = geometry(2, 16, 8, 8, 16, 1);
  const auto x = random_floats(2 * 16 * 64, 7);
  Tensor w = randn({16, 16, 3, 3});
  std::vector<float> y(2 * 16 * 64), again(y.size()), gx(x.size());
  auto forward = [&](std::vector<float>& out) {
    cpu::winograd_forward(g, x.data(), w.data_ptr<float>(), nullptr, out.data(),
                          cpu::weight_version_of(w));
  };
  forward(y);
  EXPECT_EQ(prepare_kept_weights(w.device()), 0);  // nothing changed

  w.mul_(-2.0);  // an in-place write, as the optimizer's: a new version
  const Device other = w.device().index == 0 ? Device("cpu:1") : Device("cpu:0");
  EXPECT_EQ(prepare_kept_weights(other), 0);
  const WeightReuseStats before = weight_reuse_stats();
  EXPECT_EQ(prepare_kept_weights(w.device()), 1);  // the forward's; no input gradient yet
  EXPECT_EQ(weight_reuse_stats().made - before.made, 1);
  forward(again);
  EXPECT_EQ(weight_reuse_stats().made - before.made, 1);
  EXPECT_EQ(weight_reuse_stats().reused - before.reused, 1);
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(again[i], -2.f * y[i], 1e-4f * (1 + std::abs(y[i])));

  // A prepared transform no pass read is not made again.
  w.mul_(0.5);
  EXPECT_EQ(prepare_kept_weights(w.device()), 1);
  w.mul_(2.0);
  EXPECT_EQ(prepare_kept_weights(w.device()), 0);

  // The input gradient's transform, read once, is prepared as well.
  cpu::winograd_backward_data(g, w.data_ptr<float>(), y.data(), gx.data(),
                              cpu::weight_version_of(w));
  forward(again);
  w.mul_(0.5);
  EXPECT_EQ(prepare_kept_weights(w.device()), 2);

  // Weights that are gone are skipped.
  forward(again);
  w.mul_(2.0);
  const Device device = w.device();
  w = Tensor();
  EXPECT_EQ(prepare_kept_weights(device), 0);
}

TEST_F(Winograd, TakesOnly3x3Stride1DenseConvolutions) {
  EXPECT_TRUE(cpu::winograd_applies(geometry(1, 64, 8, 8, 64, 1)));
  ConvGeometry g = geometry(1, 64, 8, 8, 64, 1);
  g.stride_h = g.stride_w = 2;
  EXPECT_FALSE(cpu::winograd_applies(g));
  g = geometry(1, 64, 8, 8, 64, 1);
  g.channels_last = true;
  EXPECT_FALSE(cpu::winograd_applies(g));
  g = geometry(1, 64, 8, 8, 64, 1);
  g.groups = 2;
  EXPECT_FALSE(cpu::winograd_applies(g));
  g = geometry(1, 64, 8, 8, 64, 1);
  g.dilation_h = 2;
  EXPECT_FALSE(cpu::winograd_applies(g));
  EXPECT_FALSE(cpu::winograd_applies(geometry(1, 8, 8, 8, 64, 1)));   // too few channels
  EXPECT_FALSE(cpu::winograd_applies(geometry(1, 64, 8, 8, 64, 3)));  // padding 3
  g = geometry(1, 64, 8, 8, 64, 0);
  g.kernel_h = g.kernel_w = 5;
  g.out_h = g.out_w = 4;
  EXPECT_FALSE(cpu::winograd_applies(g));
}

}  // namespace
}  // namespace loom
