// nn::init: fans and gains as PyTorch computes them, and initialisers whose
// samples have the distribution their formula promises: bounds, mean,
// standard deviation, spread up to the bounds, and no repeated values.  An
// initialiser that wrote zeros (or a constant, or a narrower range) fails
// these.  Tolerances are five standard errors of the statistic for the
// sample size, so the checks do not depend on the seed.
#include <gtest/gtest-spi.h>

#include <cmath>
#include <functional>
#include <set>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using nn::init::FanMode;
using nn::init::Nonlinearity;

struct Stats {
  double mean = 0, std = 0, min = INFINITY, max = -INFINITY;
  int64_t n = 0;
  size_t distinct = 0;
};

Stats stats(const Tensor& t) {
  const auto v = t.to_vector<double>();
  Stats s;
  s.n = static_cast<int64_t>(v.size());
  for (double x : v) {
    s.mean += x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean /= s.n;
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / (s.n - 1));
  s.distinct = std::set<double>(v.begin(), v.end()).size();
  return s;
}

// Samples of Uniform(low, high): inside the bounds (float32 rounding aside),
// reaching near both, mean and std of the uniform, and (almost) all distinct
// (float32 draws collide now and then: ~n^2 / 2^25 pairs).
void expect_uniform(const Tensor& t, double low, double high, const std::string& what) {
  const Stats s = stats(t);
  const double width = high - low, std = width / std::sqrt(12.0);
  EXPECT_GE(s.min, low - 1e-6 * width) << what;
  EXPECT_LE(s.max, high + 1e-6 * width) << what;
  // The chance that all n samples miss the outer 0.1% of the range at one end is (0.999)^n.
  EXPECT_LT(s.min, low + 1e-3 * width * std::max(1.0, 2e4 / s.n)) << what;
  EXPECT_GT(s.max, high - 1e-3 * width * std::max(1.0, 2e4 / s.n)) << what;
  EXPECT_NEAR(s.mean, (low + high) / 2, 5 * std / std::sqrt(s.n)) << what;
  // Relative standard error of a uniform sample's std: sqrt(0.2 / n).
  EXPECT_NEAR(s.std, std, 5 * std * std::sqrt(0.2 / s.n)) << what;
  EXPECT_GT(s.distinct, 0.95 * s.n) << what;
}

// Samples of Normal(mean, std).
void expect_normal(const Tensor& t, double mean, double std, const std::string& what) {
  const Stats s = stats(t);
  EXPECT_NEAR(s.mean, mean, 5 * std / std::sqrt(s.n)) << what;
  // Relative standard error of a normal sample's std: sqrt(1 / (2 n)).
  EXPECT_NEAR(s.std, std, 5 * std * std::sqrt(0.5 / s.n)) << what;
  // Tails present: about 0.3% of samples lie beyond 3 std.
  EXPECT_GT(std::max(s.max - mean, mean - s.min), 3 * std) << what;
  EXPECT_GT(s.distinct, 0.95 * s.n) << what;
}

// How many gtest failures `checks` reports (intercepted, so they do not fail
// this test).
int failures_of(const std::function<void()>& checks) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    checks();
  }
  return results.size();
}

using Fans = std::pair<int64_t, int64_t>;

TEST(Init, FanInAndFanOut) {
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(empty({50, 100})), Fans(100, 50));
  // Conv weight (out, in, kh, kw): fans include the receptive field.
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(empty({16, 3, 5, 7})), Fans(105, 560));
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(empty({8, 4, 3})), Fans(12, 24));
  EXPECT_LOOM_ERROR(nn::init::calculate_fan_in_and_fan_out(empty({5})), "fewer than 2 dimensions", "[5]");
  EXPECT_LOOM_ERROR(nn::init::calculate_fan_in_and_fan_out(empty({})), "fewer than 2 dimensions");
}

TEST(Init, GainsMatchPyTorch) {
  // torch.nn.init.calculate_gain (1.13).
  EXPECT_EQ(nn::init::calculate_gain(Nonlinearity::kLinear), 1.0);
  EXPECT_EQ(nn::init::calculate_gain(Nonlinearity::kConv), 1.0);
  EXPECT_EQ(nn::init::calculate_gain(Nonlinearity::kSigmoid), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(Nonlinearity::kTanh), 5.0 / 3);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(Nonlinearity::kReLU), 1.4142135623730951);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(Nonlinearity::kLeakyReLU), 1.4141428569978354);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(Nonlinearity::kLeakyReLU, 0.2), 1.3867504905630728);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(Nonlinearity::kLeakyReLU, std::sqrt(5.0)),
                   0.57735026918962573);
}

TEST(Init, UniformAndNormal) {
  manual_seed(1);
  Tensor t = empty({200, 100});
  expect_uniform(nn::init::uniform_(t), 0, 1, "uniform_ default");
  expect_uniform(nn::init::uniform_(t, -3, 5), -3, 5, "uniform_(-3, 5)");
  expect_normal(nn::init::normal_(t), 0, 1, "normal_ default");
  expect_normal(nn::init::normal_(t, 2, 0.5), 2, 0.5, "normal_(2, 0.5)");
  Tensor d = empty({20000}, kFloat64);
  expect_uniform(nn::init::uniform_(d, -0.25, 0.75), -0.25, 0.75, "uniform_ float64");
  expect_normal(nn::init::normal_(d, -1, 3), -1, 3, "normal_ float64");
  // std 0 is allowed: every value is the mean.
  EXPECT_TRUE(testing::AllClose(nn::init::normal_(d, 4, 0), full({20000}, 4.0, kFloat64), 0, 0));
}

TEST(Init, ConstantZerosOnes) {
  Tensor t = empty({3, 4});
  EXPECT_EQ(nn::init::constant_(t, 2.5).to_vector<float>(), std::vector<float>(12, 2.5f));
  EXPECT_EQ(nn::init::zeros_(t).to_vector<float>(), std::vector<float>(12, 0.0f));
  EXPECT_EQ(nn::init::ones_(t).to_vector<float>(), std::vector<float>(12, 1.0f));
}

TEST(Init, KaimingUniformAndNormal) {
  manual_seed(2);
  // Not square, so fan in (128 * 9) and fan out (256 * 9) differ.
  Tensor w = empty({256, 128, 3, 3});
  const double fan_in = 128 * 9, fan_out = 256 * 9;
  const double relu = std::sqrt(2.0);
  nn::init::kaiming_uniform_(w, 0, FanMode::kFanIn, Nonlinearity::kReLU);
  double b = relu * std::sqrt(3.0 / fan_in);
  expect_uniform(w, -b, b, "kaiming_uniform_ relu fan_in");
  nn::init::kaiming_uniform_(w, 0, FanMode::kFanOut, Nonlinearity::kReLU);
  b = relu * std::sqrt(3.0 / fan_out);
  expect_uniform(w, -b, b, "kaiming_uniform_ relu fan_out");
  // Defaults: leaky ReLU with a = 0 (gain sqrt(2)), fan in.
  nn::init::kaiming_uniform_(w);
  b = relu * std::sqrt(3.0 / fan_in);
  expect_uniform(w, -b, b, "kaiming_uniform_ defaults");
  // a = sqrt(5), as Linear and Conv2d's reset: bound 1 / sqrt(fan_in).
  nn::init::kaiming_uniform_(w, std::sqrt(5.0));
  expect_uniform(w, -1 / std::sqrt(fan_in), 1 / std::sqrt(fan_in), "kaiming_uniform_ a=sqrt(5)");

  nn::init::kaiming_normal_(w);
  expect_normal(w, 0, relu / std::sqrt(fan_in), "kaiming_normal_ defaults");
  nn::init::kaiming_normal_(w, 0, FanMode::kFanOut, Nonlinearity::kReLU);
  expect_normal(w, 0, relu / std::sqrt(fan_out), "kaiming_normal_ fan_out");
  nn::init::kaiming_normal_(w, 0, FanMode::kFanIn, Nonlinearity::kTanh);
  expect_normal(w, 0, (5.0 / 3) / std::sqrt(fan_in), "kaiming_normal_ tanh");
}

TEST(Init, XavierUniformAndNormal) {
  manual_seed(3);
  Tensor w = empty({300, 200});
  double b = std::sqrt(6.0 / 500);
  expect_uniform(nn::init::xavier_uniform_(w), -b, b, "xavier_uniform_");
  expect_uniform(nn::init::xavier_uniform_(w, 2.0), -2 * b, 2 * b, "xavier_uniform_ gain 2");
  expect_normal(nn::init::xavier_normal_(w), 0, std::sqrt(2.0 / 500), "xavier_normal_");
  expect_normal(nn::init::xavier_normal_(w, 0.5), 0, 0.5 * std::sqrt(2.0 / 500), "xavier_normal_ gain 0.5");
  // Conv shape: fans include the receptive field.
  Tensor c = empty({64, 32, 5, 5}, kFloat64);
  b = std::sqrt(6.0 / (32 * 25 + 64 * 25));
  expect_uniform(nn::init::xavier_uniform_(c), -b, b, "xavier_uniform_ conv");
}

// What the test above relies on: a degenerate initialiser fails the checks.
TEST(Init, TheChecksRejectADegenerateInitialiser) {
  Tensor w = zeros({200, 100});
  EXPECT_GE(failures_of([&] { expect_uniform(w, -0.1, 0.1, "zeros"); }), 3);
  EXPECT_GE(failures_of([&] { expect_normal(w, 0, 0.1, "zeros"); }), 3);
  nn::init::constant_(w, 0.05);
  EXPECT_GE(failures_of([&] { expect_uniform(w, -0.1, 0.1, "constant"); }), 3);
  // Right shape, wrong spread: Uniform(-b/2, b/2) claimed as Uniform(-b, b),
  // Normal(0, 0.9 s) claimed as Normal(0, s).
  manual_seed(4);
  nn::init::uniform_(w, -0.05, 0.05);
  EXPECT_GE(failures_of([&] { expect_uniform(w, -0.1, 0.1, "narrow"); }), 2);
  nn::init::normal_(w, 0, 0.09);
  EXPECT_GE(failures_of([&] { expect_normal(w, 0, 0.1, "narrow normal"); }), 1);
  // And the honest samples pass.
  nn::init::normal_(w, 0, 0.1);
  EXPECT_EQ(failures_of([&] { expect_normal(w, 0, 0.1, "normal"); }), 0);
}

TEST(Init, LinearAndConvResetFollowPyTorch) {
  manual_seed(5);
  // kaiming_uniform_(a = sqrt(5)) for the weight, Uniform(+-1/sqrt(fan_in)) for the bias.
  nn::Linear fc(300, 200);
  const double lb = 1 / std::sqrt(300.0);
  expect_uniform(fc->weight, -lb, lb, "Linear weight");
  const Stats bias = stats(fc->bias);
  EXPECT_GE(bias.min, -lb * (1 + 1e-6));
  EXPECT_LE(bias.max, lb * (1 + 1e-6));
  EXPECT_GT(bias.distinct, 190u);
  EXPECT_NEAR(bias.std, lb / std::sqrt(3.0), 5 * lb / std::sqrt(3.0) * std::sqrt(0.2 / 200));
  nn::Conv2d conv(nn::Conv2dOptions(32, 64, 5));
  const double cb = 1 / std::sqrt(32.0 * 25);
  expect_uniform(conv->weight, -cb, cb, "Conv2d weight");
}

TEST(Init, InPlaceOnParametersWithoutHistory) {
  nn::Linear fc(8, 4);
  Tensor w = fc->weight;
  const void* data = w.data_ptr();
  nn::init::xavier_normal_(w);
  EXPECT_EQ(w.data_ptr(), data);  // the same storage, written in place
  EXPECT_TRUE(fc->weight.is_same(w));
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_FALSE(w.grad_fn());
  // A view writes through to its base.
  Tensor base = zeros({50, 400});
  Tensor view = base.t();  // (400, 50), non-contiguous
  nn::init::kaiming_uniform_(view);
  const double b = std::sqrt(2.0) * std::sqrt(3.0 / 50);
  expect_uniform(base, -b, b, "kaiming_uniform_ through a view");
  // Other devices and float64 keep their device and dtype.
  Tensor on1 = empty({100, 100}, TensorOptions(kFloat64).device(Device("cpu:1")));
  nn::init::normal_(on1, 0, 2);
  EXPECT_EQ(on1.device(), Device("cpu:1"));
  EXPECT_EQ(on1.dtype(), kFloat64);
  expect_normal(on1, 0, 2, "normal_ on cpu:1");
}

TEST(Init, GeneratorsMakeItReproducible) {
  Tensor a = empty({64, 64}), b = empty({64, 64});
  Generator g1(9), g2(9), g3(10);
  nn::init::kaiming_normal_(a, 0, FanMode::kFanIn, Nonlinearity::kReLU, &g1);
  nn::init::kaiming_normal_(b, 0, FanMode::kFanIn, Nonlinearity::kReLU, &g2);
  EXPECT_TRUE(testing::AllClose(a, b, 0, 0));
  nn::init::kaiming_normal_(b, 0, FanMode::kFanIn, Nonlinearity::kReLU, &g3);
  EXPECT_FALSE(testing::AllClose(a, b, 0, 0));
  manual_seed(12);
  nn::init::xavier_uniform_(a);
  manual_seed(12);
  nn::init::xavier_uniform_(b);
  EXPECT_TRUE(testing::AllClose(a, b, 0, 0));
}

TEST(Init, BadArgumentsThrow) {
  Tensor t = empty({4, 4});
  EXPECT_LOOM_ERROR(nn::init::uniform_(t, 1, -1), "uniform_", "low <= high");
  EXPECT_LOOM_ERROR(nn::init::normal_(t, 0, -1), "normal_", "std must be >= 0", "-1");
  Tensor ints = zeros({4, 4}, kInt64);
  EXPECT_LOOM_ERROR(nn::init::uniform_(ints), "uniform_", "floating", "int64");
  EXPECT_LOOM_ERROR(nn::init::kaiming_normal_(ints), "kaiming_normal_", "floating");
  EXPECT_LOOM_ERROR(nn::init::constant_(ints, 1), "constant_", "floating");
  Tensor undefined;
  EXPECT_LOOM_ERROR(nn::init::xavier_uniform_(undefined), "xavier_uniform_", "undefined");
  Tensor vec = empty({10});
  EXPECT_LOOM_ERROR(nn::init::kaiming_uniform_(vec), "fewer than 2 dimensions");
  EXPECT_LOOM_ERROR(nn::init::xavier_normal_(vec), "fewer than 2 dimensions");
  // A zero-element weight (fan 0) is left as it is, as PyTorch does.
  Tensor no_fan = empty({4, 0});
  EXPECT_NO_THROW(nn::init::kaiming_uniform_(no_fan));
  EXPECT_NO_THROW(nn::init::xavier_normal_(no_fan));
  EXPECT_EQ(no_fan.sizes(), (IntList{4, 0}));
}

}  // namespace
}  // namespace loom
