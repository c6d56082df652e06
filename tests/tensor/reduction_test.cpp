// Forward values and errors of reductions and softmax.  Expected numbers
// marked "PyTorch 1.13" were computed with torch 1.13 (CPU, float64).
#include <cmath>
#include <limits>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

// (3, 4)
Tensor small() {
  return tensor<double>({0.5, -1.2, 3.1, 0.0, 2.2, 1.7, -0.3, 4.4, -2.5, 0.9, 1.1, -0.7}, {3, 4});
}

// (2, 3, 4): ((7 i) % 11 - 5) / 4, as in the PyTorch reference script.
Tensor cube() {
  std::vector<double> v;
  for (int i = 0; i < 24; ++i) v.push_back(((i * 7) % 11 - 5) * 0.25);
  return tensor<double>(v, {2, 3, 4});
}

TEST(Sum, AdjacentAndSplitDims) {
  // PyTorch 1.13: y.sum([0, 2]).
  EXPECT_TRUE(AllClose(cube().sum({0, 2}), tensor<double>({1.5, -0.25, -2.0})));
  EXPECT_TRUE(AllClose(cube().sum({1, 2}), tensor<double>({-1.25, 0.5})));
  EXPECT_TRUE(AllClose(small().sum({0}, true), tensor<double>({0.2, 1.4, 3.9, 3.7}, {1, 4})));
  EXPECT_TRUE(AllClose(small().t().sum({0}), tensor<double>({2.4, 8.0, -1.2})));
  EXPECT_EQ(tensor<int32_t>({1, 2, 3}).sum().dtype(), kInt64);
  EXPECT_EQ(tensor<bool>({true, false, true}).sum().item<int64_t>(), 2);
}

TEST(Sum, LargeFullReductionIsExactAndParallel) {
  // 0 + 1 + ... + (n-1) is exact in double accumulation.
  const int64_t n = 1 << 21;
  EXPECT_EQ(arange(n, kFloat64).sum().item<double>(), double(n) * (n - 1) / 2);
  EXPECT_EQ(arange(n).sum().item<int64_t>(), n * (n - 1) / 2);
  // Few outputs, long rows, inner > 1: the reduced axis is split.
  Tensor x = ones({200000, 3}, kFloat32);
  EXPECT_TRUE(AllClose(x.sum({0}), full({3}, 200000.0f)));
  Tensor y = arange(3 * 100000, kFloat64).view({3, 100000});
  EXPECT_TRUE(AllClose(y.sum({1}), tensor<double>({4999950000.0, 14999950000.0, 24999950000.0})));
}

TEST(Sum, EmptyGivesZero) {
  EXPECT_TRUE(AllClose(zeros({0, 3}).sum({0}), zeros({3})));
}

TEST(Mean, AllAndDims) {
  EXPECT_NEAR(small().mean().item<double>(), 0.766666666666667, 1e-12);
  // PyTorch 1.13: x.mean(1), y.mean([0, 2]).
  EXPECT_TRUE(AllClose(small().mean({1}), tensor<double>({0.6, 2.0, -0.3})));
  EXPECT_TRUE(AllClose(cube().mean({0, 2}), tensor<double>({0.1875, -0.03125, -0.25})));
  EXPECT_EQ(small().mean({-1}, true).sizes(), (IntList{3, 1}));
  EXPECT_TRUE(std::isnan(zeros({0}).mean().item<double>()));
}

TEST(Mean, IntegerInputThrows) {
  EXPECT_LOOM_ERROR(tensor<int64_t>({1, 2}).mean(), "mean", "floating-point", "int64");
}

TEST(Var, MatchesPyTorch) {
  // PyTorch 1.13.
  EXPECT_NEAR(small().var().item<double>(), 3.653333333333334, 1e-12);
  EXPECT_NEAR(small().std(false).item<double>(), 1.8299969641747742, 1e-12);
  EXPECT_TRUE(AllClose(small().var(IntList{1}),
                       tensor<double>({3.2866666666666666, 3.726666666666668, 2.8})));
  EXPECT_TRUE(AllClose(small().std({0}, true, true),
                       tensor<double>({2.379775899813538, 1.4977761292440648, 1.7088007490635062,
                                       2.7646579052991953},
                                      {1, 4})));
  EXPECT_TRUE(AllClose(small().var({0}, false),
                       tensor<double>({3.7755555555555556, 1.4955555555555555, 1.9466666666666665,
                                       5.095555555555556})));
  EXPECT_TRUE(AllClose(cube().var({0, 2}),
                       tensor<double>({0.78125, 0.5970982142857143, 0.7321428571428571})));
  EXPECT_TRUE(AllClose(cube().std({1, 2}, true, true),
                       tensor<double>({0.8690272339422587, 0.8036375634160796}, {2, 1, 1})));
  // One element with Bessel's correction: 0 / 0.
  EXPECT_TRUE(std::isnan(ones({1}).var().item<double>()));
}

TEST(Var, LargeFloat32IsAccurate) {
  // Values 1e4 + {0, 1}: a one-pass float formula would lose the variance.
  Tensor y = tensor<float>({10000.0f, 10001.0f}).expand({1 << 19, 2}).contiguous();
  EXPECT_NEAR(y.var(false).item<double>(), 0.25, 1e-6);
  EXPECT_TRUE(AllClose(y.std({0}, false), full({2}, 0.0f)));
  EXPECT_TRUE(AllClose(y.var({1}, true), full({1 << 19}, 0.5f)));
}

TEST(Var, ErrorsNameTheOp) {
  EXPECT_LOOM_ERROR(tensor<int64_t>({1, 2}).var(), "var", "int64");
  EXPECT_LOOM_ERROR(small().std(IntList{2}), "std", "dimension out of range", "got 2");
}

TEST(MaxMin, AllElements) {
  EXPECT_EQ(small().max().item<double>(), 4.4);
  EXPECT_EQ(small().min().item<double>(), -2.5);
  EXPECT_EQ(small().max().dim(), 0);
  EXPECT_EQ(tensor<int64_t>({3, -7, 5}).min().item<int64_t>(), -7);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(tensor<double>({1, nan, 3}).max().item<double>()));
  // A large tensor, max in the middle (the reduced axis is split over threads).
  Tensor big = arange(1 << 20, kFloat32) * -1.0f;
  big.data_ptr<float>()[777777] = 5.0f;
  EXPECT_EQ(big.max().item<float>(), 5.0f);
  EXPECT_EQ(big.argmax().item<int64_t>(), 777777);
  EXPECT_EQ(big.min().item<float>(), -1048575.0f);
}

TEST(MaxMin, EmptyThrows) {
  EXPECT_LOOM_ERROR(zeros({0}).max(), "max", "non-empty", "[0]");
  EXPECT_LOOM_ERROR(zeros({2, 0}).min(1), "min", "size 0");
}

TEST(MaxMin, AlongDimMatchesPyTorch) {
  // PyTorch 1.13: y.max(1), y.min(2, keepdim=True).
  auto [v, i] = cube().max(1);
  EXPECT_TRUE(AllClose(v, tensor<double>({0.25, 0.75, 1.0, 1.25, 0.75, 1.0, 1.25, 0.5}, {2, 4})));
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 1, 0, 2, 1, 0, 2}));
  auto [mv, mi] = cube().min(2, true);
  EXPECT_EQ(mv.sizes(), (IntList{2, 3, 1}));
  EXPECT_TRUE(AllClose(mv, tensor<double>({-1.25, -0.75, -1.25, -0.5, -1.0, -1.25}, {2, 3, 1})));
  EXPECT_EQ(mi.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3, 1, 3, 2}));
  // Non-contiguous input.
  auto [tv, ti] = small().t().max(0);
  EXPECT_TRUE(AllClose(tv, tensor<double>({3.1, 4.4, 1.1})));
  EXPECT_EQ(ti.to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 2}));
}

TEST(MaxMin, TiesPickTheFirstAndNanWins) {
  auto [v, i] = tensor<float>({1, 3, 3, 2}, {1, 4}).max(1);
  EXPECT_EQ(i.item<int64_t>(), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto [nv, ni] = tensor<float>({1, nan, 3, nan}).max(0);
  EXPECT_TRUE(std::isnan(nv.item<float>()));
  EXPECT_EQ(ni.item<int64_t>(), 1);
  EXPECT_EQ(tensor<float>({2, -1, -1}).argmin().item<int64_t>(), 1);
}

TEST(ArgMaxMin, FlattenedAndAlongDim) {
  // PyTorch 1.13: y.argmax(), y.argmin(), y.argmax(0).
  EXPECT_EQ(cube().argmax().item<int64_t>(), 3);
  EXPECT_EQ(cube().argmin().item<int64_t>(), 0);
  EXPECT_EQ(cube().argmax(0).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(small().argmin(1, true).sizes(), (IntList{3, 1}));
  EXPECT_EQ(small().argmin(1, true).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(tensor<int64_t>({4, 9, 9, 1}).argmax().item<int64_t>(), 1);
  EXPECT_LOOM_ERROR(small().argmax(-3), "argmax", "dimension out of range");
}

TEST(Softmax, MatchesPyTorch) {
  // PyTorch 1.13: x.softmax(1), y.softmax(1), y.log_softmax(0).
  EXPECT_TRUE(AllClose(
      small().softmax(1),
      tensor<double>({0.0655610786461136, 0.011976928887770523, 0.8826971881834168,
                      0.03976480428269912, 0.09333905302058121, 0.0566129974055256,
                      0.007661736038750425, 0.8423862135351428, 0.01358474494824341,
                      0.4070546567475367, 0.49717768047338257, 0.08218291783083732},
                     {3, 4}),
      1e-10));
  EXPECT_TRUE(AllClose(
      small().log_softmax(0),
      tensor<double>({-1.8754469819216912, -3.3083623631243633, -0.15589933848665735,
                      -4.418207322600111, -0.1754469819216911, -0.40836236312436325,
                      -3.555899338486657, -0.018207322600110494, -4.875446981921692,
                      -1.2083623631243632, -2.155899338486657, -5.118207322600111},
                     {3, 4}),
      1e-10));
  EXPECT_TRUE(AllClose(
      cube().softmax(1),
      tensor<double>({0.14780404965619495, 0.38902479913658233, 0.14780404965619495,
                      0.7306791292026887, 0.6624117938958736, 0.11145747105020276,
                      0.6624117938958736, 0.20934307548219694, 0.18978415644793137,
                      0.499517729813215, 0.18978415644793137, 0.05997779531511428,
                      0.38902479913658233, 0.14780404965619495, 0.7306791292026887,
                      0.38902479913658233, 0.11145747105020276, 0.6624117938958736,
                      0.20934307548219694, 0.11145747105020276, 0.499517729813215,
                      0.18978415644793137, 0.05997779531511428, 0.499517729813215},
                     {2, 3, 4}),
      1e-10));
  EXPECT_TRUE(AllClose(cube().log_softmax(0).select(0, 1).select(0, 0),
                       tensor<double>({-0.16022415043808716, -1.3132616875182228,
                                       -0.16022415043808716, -1.3132616875182228}),
                       1e-10));
  // Non-contiguous input, last dim.
  EXPECT_TRUE(AllClose(small().t().softmax(-1).sum({1}), ones({4}, kFloat64), 1e-12));
}

TEST(Softmax, StableForLargeLogits) {
  Tensor x = tensor<float>({1000.0f, 1001.0f, -1000.0f});
  EXPECT_TRUE(AllClose(x.softmax(0), tensor<float>({0.26894142f, 0.73105858f, 0.0f}), 1e-5));
  // PyTorch 1.13 (float32).
  EXPECT_TRUE(AllClose(x.log_softmax(0), tensor<float>({-1.31326163f, -0.31326166f, -2001.3132f}),
                       1e-5));
}

TEST(Softmax, Float32AgreesWithFloat64) {
  // float32 uses a vectorised exp; compare with float64 over a wide range.
  Generator gen(5);
  const Tensor x = rand({64, 300}, kFloat64, &gen) * 100.0 - 50.0;
  const Tensor xf = x.to(kFloat32);
  for (int64_t dim : {0, 1}) {
    // (x itself rounds to float by up to 3e-6 in the exponent at |x| = 50.)
    EXPECT_TRUE(AllClose(xf.softmax(dim), x.softmax(dim).to(kFloat32), 1e-5, 1e-30)) << dim;
    EXPECT_TRUE(AllClose(xf.log_softmax(dim), x.log_softmax(dim).to(kFloat32), 1e-6, 1e-5))
        << dim;
  }
  // Very negative logits underflow to exactly 0, NaN propagates.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(AllClose(tensor<float>({0.0f, -200.0f}).softmax(0), tensor<float>({1.0f, 0.0f})));
  EXPECT_TRUE(std::isnan(tensor<float>({0.0f, nan}).softmax(0).to_vector<float>()[0]));
}

TEST(Softmax, Errors) {
  EXPECT_LOOM_ERROR(tensor<int64_t>({1, 2}).softmax(0), "softmax", "floating-point", "int64");
  EXPECT_LOOM_ERROR(small().log_softmax(2), "log_softmax", "dimension out of range");
}

}  // namespace
}  // namespace loom
