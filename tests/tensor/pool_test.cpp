// Pooling forward values, backward scatter, and errors.  Expected values
// were computed with PyTorch 1.13 (F.max_pool2d(return_indices=True),
// F.avg_pool2d, F.adaptive_avg_pool2d) on the same pattern inputs, whose
// values are all distinct.
#include "tensor/native/Pooling.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

Tensor pat(int64_t n, int64_t mul, int64_t mod, IntList shape, DType dtype = kFloat64) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * mul) % mod) / mod - 0.5;
  return tensor<double>(v, shape).to(dtype);
}

Tensor input() { return pat(150, 37, 151, {2, 3, 5, 5}); }
Tensor plane() { return input().select(0, 0).narrow(0, 0, 1); }  // (1, 5, 5)

TEST(MaxPool2d, Kernel2MatchesPyTorch) {
  for (DType dtype : {kFloat64, kFloat32}) {
    auto [y, idx] = max_pool2d_with_indices(input().to(dtype), {2, 2});
    EXPECT_EQ(y.sizes(), (IntList{2, 3, 2, 2}));
    EXPECT_TRUE(AllClose(
        y,
        tensor<double>({-0.0298013, 0.4602649, 0.4205298, 0.4403974, 0.0960265, 0.3609272,
                        0.3211921, 0.0364238, 0.2218543, 0.486755, 0.4470199, 0.1622517,
                        0.3476821, 0.3675497, 0.3278146, 0.2880795, 0.4735099, 0.4933775,
                        0.4536424, 0.4139073, 0.3741722, 0.089404, 0.0496689, 0.3145695},
                       {2, 3, 2, 2}),
        1e-6, 1e-6));
    EXPECT_EQ(idx.dtype(), kInt64);
    EXPECT_EQ(idx.to_vector<int64_t>(),
              (std::vector<int64_t>{6, 8, 16, 12, 6, 3, 11, 18, 6, 3, 11, 18,
                                    6, 2, 10, 18, 6, 2, 10, 18, 1, 8, 16, 13}));
  }
}

TEST(MaxPool2d, PaddingStrideCeilModeMatchPyTorch) {
  auto [y, idx] = max_pool2d_with_indices(input(), {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
  EXPECT_EQ(y.sizes(), (IntList{2, 3, 3, 3}));
  const std::vector<double> first = {-0.0298013, 0.4602649, 0.4801325, 0.4205298, 0.4602649,
                                     0.4602649, 0.4205298, 0.4205298, 0.3807947};
  const auto v = y.to_vector<double>();
  for (size_t i = 0; i < first.size(); ++i) EXPECT_NEAR(v[i], first[i], 1e-6);
  EXPECT_EQ(idx.to_vector<int64_t>(),
            (std::vector<int64_t>{6,  8,  4,  16, 8,  8,  16, 16, 24, 6,  3,  3,  11, 7,
                                  19, 15, 23, 19, 6,  3,  3,  11, 7,  19, 15, 23, 19, 6,
                                  2,  9,  6,  6,  14, 21, 18, 18, 6,  2,  9,  6,  6,  14,
                                  21, 18, 18, 1,  1,  9,  5,  13, 9,  21, 17, 24}));
  // max_pool2d is the first half of the pair; (C, H, W) input works too.
  EXPECT_TRUE(AllClose(max_pool2d(input().select(0, 1), {3, 3}, {2, 2}, {1, 1}, {1, 1}, true),
                       y.select(0, 1), 0, 0));
}

TEST(MaxPool2d, DilationAndNaN) {
  // 1 x 1 x 4 x 4 with values 0..15: dilation 2 windows pick corners of 3x3 spans.
  const Tensor x = arange(16, kFloat32).reshape({1, 1, 4, 4});
  auto [y, idx] = max_pool2d_with_indices(x, {2, 2}, {1, 1}, {0, 0}, {2, 2});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10, 11, 14, 15}));
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{10, 11, 14, 15}));
  const Tensor n = tensor<float>({1, NAN, 3, 2}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(max_pool2d(n, {2, 2}).item<float>()));
}

// float32 planes take the vectorised path, float64 the scalar one: same
// values, same outputs and indices, for wide and narrow (< 8) outputs.
TEST(MaxPool2d, VectorPathMatchesScalarPath) {
  struct Case {
    IntList k, s, p, d;
    bool ceil;
  };
  const std::vector<Case> cases = {
      {{2, 2}, {}, {0, 0}, {1, 1}, false},  {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
      {{3, 3}, {2, 2}, {1, 1}, {1, 1}, true}, {{2, 3}, {1, 1}, {1, 1}, {2, 1}, false},
      {{3, 2}, {3, 3}, {1, 0}, {1, 2}, true}, {{2, 2}, {2, 2}, {0, 0}, {1, 1}, true},
      // Windows inside the plane: the taps read it directly, the rows' last
      // loads through a mask (strides 1, 2 and a gather's 3).
      {{3, 3}, {1, 1}, {0, 0}, {1, 1}, false}, {{3, 3}, {3, 3}, {0, 0}, {1, 1}, false},
      {{2, 2}, {1, 1}, {0, 0}, {2, 2}, false}, {{2, 3}, {2, 2}, {0, 0}, {1, 2}, false},
  };
  Generator gen(11);
  for (const IntList& shape : {IntList{2, 3, 21, 38}, IntList{2, 3, 14, 14}, IntList{1, 2, 7, 5},
                               IntList{2, 3, 28, 28}, IntList{1, 2, 9, 13}, IntList{1, 1, 3, 17}}) {
    const Tensor x = randn(shape, kFloat32, &gen);
    for (const Case& c : cases) {
      auto [yf, idf] = max_pool2d_with_indices(x, c.k, c.s, c.p, c.d, c.ceil);
      auto [yd, idd] = max_pool2d_with_indices(x.to(kFloat64), c.k, c.s, c.p, c.d, c.ceil);
      EXPECT_TRUE(AllClose(yf, yd, 0, 0)) << shape_str(shape) << shape_str(c.k);
      EXPECT_EQ(idf.to_vector<int64_t>(), idd.to_vector<int64_t>()) << shape_str(c.k);
    }
  }
  // NaN wins in the vector path too.
  Tensor n = zeros({1, 1, 2, 16});
  n.narrow(3, 5, 1).fill_(NAN);
  auto [yn, in] = max_pool2d_with_indices(n, {2, 2});
  EXPECT_TRUE(std::isnan(yn.to_vector<float>()[2]));
  EXPECT_EQ(in.to_vector<int64_t>()[2], 21);  // the last NaN, as PyTorch 1.13 reports
}

TEST(MaxPool2d, BackwardScattersToArgmax) {
  auto [y, idx] = max_pool2d_with_indices(input(), {2, 2});
  const Tensor go = ones(y.sizes(), kFloat64);
  const Tensor gi = native::max_pool2d_backward(go, input().sizes(), {2, 2}, {}, {0, 0}, {1, 1},
                                                false, idx);
  EXPECT_EQ(gi.sizes(), input().sizes());
  const auto g = gi.to_vector<double>();
  const auto ix = idx.to_vector<int64_t>();
  double total = 0;
  for (double v : g) total += v;
  EXPECT_DOUBLE_EQ(total, 24.0);
  for (size_t o = 0; o < ix.size(); ++o) EXPECT_EQ(g[(o / 4) * 25 + ix[o]], 1.0);
}

TEST(AvgPool2d, PaddingAndCountIncludePadMatchPyTorch) {
  EXPECT_TRUE(AllClose(avg_pool2d(plane(), {3, 3}, {2, 2}, {1, 1}, false, true),
                       tensor<double>({-0.1177336, 0.0684327, 0.0978661, 0.0485651, 0.107064,
                                       -0.0169242, 0.071376, -0.0367918, 0.0647535},
                                      {1, 3, 3}),
                       1e-5, 1e-6));
  EXPECT_TRUE(AllClose(avg_pool2d(plane(), {3, 3}, {2, 2}, {1, 1}, false, false),
                       tensor<double>({-0.2649007, 0.102649, 0.2201987, 0.0728477, 0.107064,
                                       -0.0253863, 0.160596, -0.0551876, 0.1456954},
                                      {1, 3, 3}),
                       1e-5, 1e-6));
}

TEST(AvgPool2d, CeilModeMatchesPyTorch) {
  EXPECT_TRUE(AllClose(avg_pool2d(plane(), {2, 2}, {2, 2}, {1, 1}, true, true),
                       tensor<double>({-0.125, -0.0662252, 0.1788079, -0.0811258, 0.205298,
                                       -0.0546358, 0.1440397, -0.0943709, 0.1456954},
                                      {1, 3, 3}),
                       1e-5, 1e-6));
  EXPECT_TRUE(AllClose(avg_pool2d(plane(), {2, 2}, {2, 2}, {1, 1}, true, false),
                       tensor<double>({-0.5, -0.1324503, 0.3576159, -0.1622517, 0.205298,
                                       -0.0546358, 0.2880795, -0.0943709, 0.1456954},
                                      {1, 3, 3}),
                       1e-5, 1e-6));
  EXPECT_TRUE(AllClose(avg_pool2d(plane().to(kFloat32), {2, 2}, {}, {0, 0}, true),
                       tensor<double>({-0.2649007, 0.2251656, 0.0927152, 0.1854305, -0.0745033,
                                       0.0430464, 0.0231788, 0.013245, 0.3807947},
                                      {1, 3, 3}),
                       1e-5, 1e-6));
}

TEST(AvgPool2d, BackwardSpreadsEvenly) {
  // 2x2 windows, stride 2, no padding: each input gets grad / 4.
  const Tensor go = tensor<double>({4, 8, 12, 16}, {1, 1, 2, 2});
  const Tensor gi = native::avg_pool2d_backward(go, {1, 1, 4, 4}, {2, 2}, {}, {0, 0}, false, true);
  EXPECT_EQ(gi.to_vector<double>(),
            (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(AdaptiveAvgPool2d, NonDivisibleSizesMatchPyTorch) {
  EXPECT_TRUE(AllClose(adaptive_avg_pool2d(plane(), {3, 2}),
                       tensor<double>({-0.1423841, 0.1810155, 0.0842531, 0.0187638, 0.0331126,
                                       0.0231788},
                                      {1, 3, 2}),
                       1e-5, 1e-6));
  // Output 1x1 is the global mean of each plane.
  const Tensor x = arange(32, kFloat32).reshape({2, 1, 4, 4});
  EXPECT_EQ(adaptive_avg_pool2d(x, {1}).to_vector<float>(), (std::vector<float>{7.5f, 23.5f}));
  // 5 -> 3: windows [0,2) [1,4) [3,5) overlap (PyTorch: [0.5, 2, 3.5] and
  // the gradient of the sum [0.5, 0.8333, 0.3333, 0.8333, 0.5]).
  const Tensor r = arange(5, kFloat64).reshape({1, 5, 1});
  EXPECT_TRUE(AllClose(adaptive_avg_pool2d(r, {3, 1}), tensor<double>({0.5, 2, 3.5}, {1, 3, 1})));
  const Tensor gi = native::adaptive_avg_pool2d_backward(ones({1, 3, 1}, kFloat64), {1, 5, 1});
  EXPECT_TRUE(AllClose(gi, tensor<double>({0.5, 5.0 / 6, 1.0 / 3, 5.0 / 6, 0.5}, {1, 5, 1})));
}

TEST(Pooling, Errors) {
  EXPECT_LOOM_ERROR(max_pool2d(zeros({1, 1, 5, 5}), {2, 2}, {2, 2}, {2, 2}), "max_pool2d",
                    "pad should be at most half of kernel size");
  EXPECT_LOOM_ERROR(max_pool2d(zeros({1, 1, 2, 2}), {3, 3}), "max_pool2d", "[1, 1, 2, 2]",
                    "too small");
  EXPECT_LOOM_ERROR(max_pool2d(zeros({5, 5}), {2, 2}), "max_pool2d", "3-D", "4-D", "[5, 5]");
  EXPECT_LOOM_ERROR(max_pool2d(zeros({1, 1, 5, 5}), {0, 2}), "max_pool2d", "kernel_size");
  EXPECT_LOOM_ERROR(max_pool2d(zeros({1, 1, 5, 5}), {2, 2, 2}), "max_pool2d", "pair");
  EXPECT_LOOM_ERROR(max_pool2d(zeros({1, 1, 5, 5}, kInt64), {2, 2}), "max_pool2d", "int64");
  EXPECT_LOOM_ERROR(avg_pool2d(zeros({1, 1, 5, 5}), {2, 2}, {0, 1}), "avg_pool2d", "stride");
  EXPECT_LOOM_ERROR(avg_pool2d(zeros({1, 0, 5, 5}), {2, 2}), "avg_pool2d", "non-zero");
  EXPECT_LOOM_ERROR(adaptive_avg_pool2d(zeros({1, 1, 5, 5}), {-1, 2}), "adaptive_avg_pool2d",
                    "output_size");
}

}  // namespace
}  // namespace loom
