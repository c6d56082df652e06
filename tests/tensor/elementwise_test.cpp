// Forward values, dtype promotion, layouts and errors of the elementwise ops.
#include <cmath>
#include <limits>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- binary arithmetic and broadcasting ---------------------------------------

TEST(Elementwise, BroadcastRowAgainstMatrix) {
  Tensor a = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor<float>({10, 20, 30});
  EXPECT_TRUE(AllClose(a + b, tensor<float>({11, 22, 33, 14, 25, 36}, {2, 3})));
  EXPECT_TRUE(AllClose(a - b, tensor<float>({-9, -18, -27, -6, -15, -24}, {2, 3})));
  EXPECT_TRUE(AllClose(a * b, tensor<float>({10, 40, 90, 40, 100, 180}, {2, 3})));
  EXPECT_TRUE(AllClose(b / a, tensor<float>({10, 10, 10, 2.5, 4, 5}, {2, 3})));
  EXPECT_TRUE(AllClose(a.add(b, 2), tensor<float>({21, 42, 63, 24, 45, 66}, {2, 3})));
}

TEST(Elementwise, BroadcastColumnAgainstRow) {
  Tensor col = tensor<float>({1, 2}, {2, 1});
  Tensor row = tensor<float>({10, 20, 30}, {1, 3});
  Tensor s = col + row;
  EXPECT_EQ(s.sizes(), (IntList{2, 3}));
  EXPECT_TRUE(AllClose(s, tensor<float>({11, 21, 31, 12, 22, 32}, {2, 3})));
  EXPECT_TRUE(AllClose(maximum(col * 15, row), tensor<float>({15, 20, 30, 30, 30, 30}, {2, 3})));
  EXPECT_TRUE(AllClose(minimum(col * 15, row), tensor<float>({10, 15, 15, 10, 20, 30}, {2, 3})));
}

TEST(Elementwise, PerChannelBroadcast) {
  Tensor x = arange(24, kFloat32).view({2, 3, 2, 2});  // (N, C, H, W)
  Tensor c = tensor<float>({100, 200, 300}, {1, 3, 1, 1});
  std::vector<float> plus, minus;
  for (int i = 0; i < 24; ++i) {
    const float ch = 100.0f * ((i / 4) % 3 + 1);
    plus.push_back(i + ch);
    minus.push_back(ch - i);
  }
  EXPECT_TRUE(AllClose(x + c, tensor<float>(plus, {2, 3, 2, 2})));
  EXPECT_TRUE(AllClose(c - x, tensor<float>(minus, {2, 3, 2, 2})));
}

TEST(Elementwise, ScalarOperandsOnBothSides) {
  Tensor a = tensor<float>({1, 2, 4});
  EXPECT_TRUE(AllClose(2 - a, tensor<float>({1, 0, -2})));
  EXPECT_TRUE(AllClose(8 / a, tensor<float>({8, 4, 2})));
  EXPECT_TRUE(AllClose(a * 0.5, tensor<float>({0.5, 1, 2})));
  EXPECT_TRUE(AllClose(3 + a, tensor<float>({4, 5, 7})));
}

TEST(Elementwise, MaximumMinimumPropagateNan) {
  Tensor a = tensor<float>({1, NAN, 3});
  Tensor b = tensor<float>({2, 0, NAN});
  const auto mx = maximum(a, b).to_vector<float>();
  const auto mn = minimum(a, b).to_vector<float>();
  EXPECT_EQ(mx[0], 2);
  EXPECT_TRUE(std::isnan(mx[1]) && std::isnan(mx[2]));
  EXPECT_EQ(mn[0], 1);
  EXPECT_TRUE(std::isnan(mn[1]) && std::isnan(mn[2]));
}

TEST(Elementwise, IntegerArithmeticStaysIntegral) {
  Tensor a = tensor<int64_t>({7, -7, 3});
  Tensor b = tensor<int64_t>({2, 2, 3});
  EXPECT_EQ((a * b).dtype(), kInt64);
  EXPECT_EQ((a * b).to_vector<int64_t>(), (std::vector<int64_t>{14, -14, 9}));
  // True division gives float32.
  Tensor q = a / b;
  EXPECT_EQ(q.dtype(), kFloat32);
  EXPECT_TRUE(AllClose(q, tensor<float>({3.5, -3.5, 1})));
  EXPECT_EQ(a.pow(b).to_vector<int64_t>(), (std::vector<int64_t>{49, 49, 27}));
}

// ---- type promotion -------------------------------------------------------------

TEST(Elementwise, IntTensorPlusFloatScalarIsFloat32) {
  Tensor r = tensor<int64_t>({1, 2}) + 0.5;
  EXPECT_EQ(r.dtype(), kFloat32);
  EXPECT_TRUE(AllClose(r, tensor<float>({1.5, 2.5})));
}

TEST(Elementwise, IntTensorPlusIntScalarKeepsWidth) {
  Tensor r64 = tensor<int64_t>({1, 2}) + 3;
  EXPECT_EQ(r64.dtype(), kInt64);
  EXPECT_EQ(r64.to_vector<int64_t>(), (std::vector<int64_t>{4, 5}));
  Tensor r32 = tensor<int32_t>({1, 2}) * int64_t{3};
  EXPECT_EQ(r32.dtype(), kInt32);
  EXPECT_EQ(r32.to_vector<int32_t>(), (std::vector<int32_t>{3, 6}));
}

TEST(Elementwise, ZeroDimTensorDoesNotWidenSameCategory) {
  Tensor f32 = tensor<float>({1, 2});
  Tensor d0 = scalar_tensor(0.25, kFloat64);
  EXPECT_EQ((f32 + d0).dtype(), kFloat32);
  EXPECT_TRUE(AllClose(f32 + d0, tensor<float>({1.25, 2.25})));
  // A dimensioned float64 operand does widen.
  EXPECT_EQ((f32 + tensor<double>({1}, {1})).dtype(), kFloat64);
  // An int tensor meeting a 0-dim float64 tensor takes the higher category's
  // dtype, float64 (torch.arange(3) * torch.tensor(.25, dtype=torch.float64)
  // is float64); a fractional Scalar gives float32.
  EXPECT_EQ((tensor<int64_t>({1}, {1}) * d0).dtype(), kFloat64);
  EXPECT_EQ((tensor<int64_t>({1}, {1}) * 0.25).dtype(), kFloat32);
  // Two 0-dim tensors promote normally.
  EXPECT_EQ((scalar_tensor(1, kInt64) * d0).dtype(), kFloat64);
  // Two dimensioned tensors promote normally.
  EXPECT_EQ((tensor<int32_t>({1}) + tensor<int64_t>({1})).dtype(), kInt64);
  EXPECT_EQ((tensor<int64_t>({1}) + tensor<float>({1})).dtype(), kFloat32);
  EXPECT_EQ((tensor<bool>({true}) + 1).dtype(), kInt64);
}

TEST(Elementwise, TranscendentalOpsPromoteIntegersToFloat32) {
  Tensor i = tensor<int64_t>({1, 4, 9});
  Tensor s = i.sqrt();
  EXPECT_EQ(s.dtype(), kFloat32);
  EXPECT_TRUE(AllClose(s, tensor<float>({1, 2, 3})));
  EXPECT_EQ(i.log().dtype(), kFloat32);
  EXPECT_TRUE(AllClose(i.log(), tensor<float>({0, std::log(4.f), std::log(9.f)})));
  EXPECT_EQ(tensor<int32_t>({0}).exp().dtype(), kFloat32);
  EXPECT_EQ(tensor<bool>({true, false}).sigmoid().dtype(), kFloat32);
  EXPECT_EQ(i.pow(0.5).dtype(), kFloat32);
  EXPECT_TRUE(AllClose(i.pow(0.5), tensor<float>({1, 2, 3})));
  EXPECT_EQ(i.pow(2).dtype(), kInt64);
  EXPECT_EQ(i.pow(2).to_vector<int64_t>(), (std::vector<int64_t>{1, 16, 81}));
}

// ---- unary values -------------------------------------------------------------------

TEST(Elementwise, NegAndAbsWorkOnIntegers) {
  Tensor i = tensor<int32_t>({3, -4, 0});
  EXPECT_EQ(i.neg().dtype(), kInt32);
  EXPECT_EQ(i.neg().to_vector<int32_t>(), (std::vector<int32_t>{-3, 4, 0}));
  EXPECT_EQ((-i).to_vector<int32_t>(), (std::vector<int32_t>{-3, 4, 0}));
  EXPECT_EQ(i.abs().to_vector<int32_t>(), (std::vector<int32_t>{3, 4, 0}));
  EXPECT_EQ(tensor<int64_t>({-5, 5}).relu().to_vector<int64_t>(), (std::vector<int64_t>{0, 5}));
  EXPECT_TRUE(AllClose(tensor<double>({-1.5, 2}).abs(), tensor<double>({1.5, 2})));
}

TEST(Elementwise, TranscendentalValues) {
  Tensor x = tensor<double>({-2, -0.5, 0, 0.5, 3});
  std::vector<double> e, sg, th;
  for (double v : {-2.0, -0.5, 0.0, 0.5, 3.0}) {
    e.push_back(std::exp(v));
    sg.push_back(1 / (1 + std::exp(-v)));
    th.push_back(std::tanh(v));
  }
  EXPECT_TRUE(AllClose(x.exp(), tensor<double>(e), 1e-12));
  EXPECT_TRUE(AllClose(x.sigmoid(), tensor<double>(sg), 1e-12));
  EXPECT_TRUE(AllClose(x.tanh(), tensor<double>(th), 1e-12));
  EXPECT_TRUE(AllClose(x.relu(), tensor<double>({0, 0, 0, 0.5, 3})));
  Tensor p = tensor<double>({0.25, 1, 4, 16});
  EXPECT_TRUE(AllClose(p.sqrt(), tensor<double>({0.5, 1, 2, 4}), 1e-12));
  EXPECT_TRUE(AllClose(p.rsqrt(), tensor<double>({2, 1, 0.5, 0.25}), 1e-12));
  EXPECT_TRUE(AllClose(p.log(), tensor<double>({std::log(0.25), 0, std::log(4.), std::log(16.)}), 1e-12));
}

// float32 over long contiguous runs takes the SIMD paths; compare with libm.
TEST(Elementwise, Float32VectorPathsMatchLibm) {
  Tensor x = linspace(-20, 20, 4001, kFloat32);
  const auto xs = x.to_vector<float>();
  std::vector<float> e, sg, th, rs, sq;
  for (float v : xs) {
    e.push_back(std::exp(v));
    sg.push_back(static_cast<float>(1 / (1 + std::exp(-static_cast<double>(v)))));
    th.push_back(std::tanh(v));
    sq.push_back(std::sqrt(std::abs(v)));
    rs.push_back(1.0f / std::sqrt(std::abs(v) + 1));
  }
  EXPECT_TRUE(AllClose(x.exp(), tensor<float>(e), 2e-6));
  EXPECT_TRUE(AllClose(x.sigmoid(), tensor<float>(sg), 2e-6));
  EXPECT_TRUE(AllClose(x.tanh(), tensor<float>(th), 2e-6, 1e-7));
  EXPECT_TRUE(AllClose(x.abs().sqrt(), tensor<float>(sq), 0, 0));  // sqrt is exact
  EXPECT_TRUE(AllClose((x.abs() + 1).rsqrt(), tensor<float>(rs), 1e-7));
  std::vector<float> l;
  for (float v : xs) l.push_back(std::log(std::abs(v) + 0.5f));
  EXPECT_TRUE(AllClose((x.abs() + 0.5f).log(), tensor<float>(l), 2e-6, 1e-7));
}

TEST(Elementwise, SpecialValues) {
  Tensor x = tensor<float>({-INFINITY, -200, 0, 200, INFINITY});
  EXPECT_EQ(x.exp().to_vector<float>(), (std::vector<float>{0, 0, 1, INFINITY, INFINITY}));
  EXPECT_EQ(x.sigmoid().to_vector<float>(), (std::vector<float>{0, 0, 0.5, 1, 1}));
  EXPECT_EQ(x.tanh().to_vector<float>(), (std::vector<float>{-1, -1, 0, 1, 1}));
  const auto lg = tensor<float>({0, -1}).log().to_vector<float>();
  EXPECT_EQ(lg[0], -INFINITY);
  EXPECT_TRUE(std::isnan(lg[1]));
  EXPECT_TRUE(std::isnan(tensor<float>({NAN}).relu().item<float>()));
  // exp(-inf) in float64 too (the SIMD exp clamps its input; we must not).
  EXPECT_EQ(tensor<double>({-kInf, -1000}).exp().to_vector<double>(), (std::vector<double>{0, 0}));
}

TEST(Elementwise, PowScalarExponents) {
  Tensor x = tensor<double>({0.5, 2, 3});
  EXPECT_TRUE(AllClose(x.pow(2), tensor<double>({0.25, 4, 9})));
  EXPECT_TRUE(AllClose(x.pow(3), tensor<double>({0.125, 8, 27})));
  EXPECT_TRUE(AllClose(x.pow(-1), tensor<double>({2, 0.5, 1.0 / 3})));
  EXPECT_TRUE(AllClose(x.pow(0), tensor<double>({1, 1, 1})));
  EXPECT_TRUE(AllClose(x.pow(1.5), tensor<double>({std::pow(0.5, 1.5), std::pow(2, 1.5), std::pow(3, 1.5)})));
  EXPECT_TRUE(AllClose(x.pow(-0.5), tensor<double>({std::sqrt(2.0), 1 / std::sqrt(2.0), 1 / std::sqrt(3.0)})));
  // Tensor exponent, broadcast.
  Tensor base = tensor<double>({2, 3}, {2, 1});
  Tensor ex = tensor<double>({0, 1, 2}, {1, 3});
  EXPECT_TRUE(AllClose(base.pow(ex), tensor<double>({1, 2, 4, 1, 3, 9}, {2, 3})));
}

TEST(Elementwise, ClampBounds) {
  Tensor x = tensor<float>({-2, -0.5, 0.5, 2, NAN});
  const auto both = x.clamp(-1, 1).to_vector<float>();
  EXPECT_EQ(std::vector<float>(both.begin(), both.end() - 1), (std::vector<float>{-1, -0.5, 0.5, 1}));
  EXPECT_TRUE(std::isnan(both.back()));
  EXPECT_TRUE(AllClose(x.narrow(0, 0, 4).clamp(0), tensor<float>({0, 0, 0.5, 2})));
  EXPECT_TRUE(AllClose(x.narrow(0, 0, 4).clamp(std::nullopt, 0), tensor<float>({-2, -0.5, 0, 0})));
  // min > max gives max everywhere, as in PyTorch.
  EXPECT_TRUE(AllClose(x.narrow(0, 0, 4).clamp(3, 1), tensor<float>({1, 1, 1, 1})));
  // Integer tensors stay integral with integral bounds, promote with fractional ones.
  Tensor i = tensor<int64_t>({-5, 0, 5});
  EXPECT_EQ(i.clamp(-1, 1).to_vector<int64_t>(), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(i.clamp(0.5).dtype(), kFloat32);
  EXPECT_TRUE(AllClose(i.clamp(0.5), tensor<float>({0.5, 0.5, 5})));
  EXPECT_EQ(tensor<uint8_t>({0, 200}).clamp(-5, 100).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 100}));
}

// ---- where, comparisons, allclose/equal ------------------------------------------

TEST(Elementwise, WhereBroadcastsAllThree) {
  Tensor cond = tensor<bool>({true, false, true});   // [3]
  Tensor a = tensor<float>({1, 2}, {2, 1});          // [2, 1]
  Tensor b = scalar_tensor(-1.0, kFloat64);           // 0-dim
  Tensor r = where(cond, a, b);
  EXPECT_EQ(r.dtype(), kFloat32);
  EXPECT_EQ(r.sizes(), (IntList{2, 3}));
  EXPECT_TRUE(AllClose(r, tensor<float>({1, -1, 1, 2, -1, 2}, {2, 3})));
  // Mixed dimensioned dtypes promote.
  Tensor m = where(tensor<bool>({true, false}), tensor<int64_t>({1, 2}), tensor<double>({5, 6}));
  EXPECT_EQ(m.dtype(), kFloat64);
  EXPECT_TRUE(AllClose(m, tensor<double>({1, 6})));
  Tensor x = tensor<float>({-1, 2, -3});
  EXPECT_TRUE(AllClose(where(x.gt(0), x, x * 10), tensor<float>({-10, 2, -30})));
}

TEST(Elementwise, ComparisonsGiveBool) {
  Tensor a = tensor<float>({1, 2, 3});
  Tensor lt = a.lt(2);
  EXPECT_EQ(lt.dtype(), kBool);
  EXPECT_EQ(lt.to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(a.ge(tensor<int64_t>({1, 3, 3})).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(a.eq(2.0).to_vector<bool>(), (std::vector<bool>{false, true, false}));
}

TEST(Elementwise, AllcloseAndEqual) {
  Tensor a = tensor<float>({1, 2, 3});
  EXPECT_TRUE(allclose(a, a + 1e-7f));
  EXPECT_FALSE(allclose(a, a + 1e-3f));
  EXPECT_TRUE(allclose(a, a + 1e-3f, 0, 2e-3));
  EXPECT_TRUE(allclose(a, tensor<double>({1, 2, 3})));
  EXPECT_FALSE(allclose(tensor<float>({NAN}), tensor<float>({NAN})));
  EXPECT_TRUE(allclose(tensor<float>({INFINITY}), tensor<float>({INFINITY})));
  EXPECT_FALSE(allclose(tensor<float>({INFINITY}), tensor<float>({-INFINITY})));
  EXPECT_TRUE(allclose(tensor<float>({2, 2}, {2, 1}), scalar_tensor(2.0)));  // broadcasts
  EXPECT_TRUE(equal(a, tensor<float>({1, 2, 3})));
  EXPECT_FALSE(equal(a, tensor<float>({1, 2, 4})));
  EXPECT_FALSE(equal(a, tensor<float>({1, 2, 3, 4})));
  EXPECT_FALSE(equal(a, a.view({3, 1})));  // same values, other shape
  EXPECT_TRUE(equal(a.t().contiguous(), a));
}

// ---- layouts ---------------------------------------------------------------------

TEST(Elementwise, NonContiguousInputs) {
  Tensor m = arange(6, kFloat32).view({2, 3});  // [[0 1 2] [3 4 5]]
  Tensor t = m.t();                             // (3, 2), strides (1, 3)
  ASSERT_FALSE(t.is_contiguous());
  EXPECT_TRUE(AllClose(t + 1, tensor<float>({1, 4, 2, 5, 3, 6}, {3, 2})));
  EXPECT_TRUE(AllClose(t * t, tensor<float>({0, 9, 1, 16, 4, 25}, {3, 2})));
  EXPECT_TRUE(AllClose(t.exp(), tensor<float>({0, 3, 1, 4, 2, 5}, {3, 2}).exp()));
  EXPECT_TRUE(AllClose((t - 2).relu(), tensor<float>({0, 1, 0, 2, 0, 3}, {3, 2})));
  Tensor cols = m.slice(1, 0, 3, 2);  // [[0 2] [3 5]]
  EXPECT_TRUE(AllClose(cols.sqrt(), tensor<float>({0, std::sqrt(2.f), std::sqrt(3.f), std::sqrt(5.f)}, {2, 2})));
  EXPECT_TRUE(AllClose(cols + t.slice(0, 0, 2), tensor<float>({0, 5, 4, 9}, {2, 2})));
  // Big enough for several threads and long runs.
  Tensor big = arange(200000, kFloat32).view({400, 500}).t();
  const auto v = (big * 2 - big).to_vector<float>();
  EXPECT_EQ(v[1], 500);
  EXPECT_EQ(v[400 * 499 + 399], 399 * 500 + 499);
}

TEST(Elementwise, EmptyAndZeroDimTensors) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.exp().sizes(), (IntList{0, 3}));
  EXPECT_EQ((e + tensor<float>({1, 2, 3})).sizes(), (IntList{0, 3}));
  EXPECT_EQ(where(e.gt(0), e, 1.0 * e).sizes(), (IntList{0, 3}));
  EXPECT_TRUE(allclose(e, e));
  Tensor s = scalar_tensor(4.0);
  EXPECT_EQ(s.sqrt().dim(), 0);
  EXPECT_EQ(s.sqrt().item<float>(), 2);
  EXPECT_EQ((s * s).item<float>(), 16);
  EXPECT_EQ((s + tensor<float>({1, 2})).to_vector<float>(), (std::vector<float>{5, 6}));
}

TEST(Elementwise, InPlaceOpsWriteThroughViews) {
  Tensor base = tensor<float>({-1, -2, 3, 4, -5, 6}, {2, 3});
  base.select(0, 1).relu_();  // row 1
  EXPECT_TRUE(AllClose(base, tensor<float>({-1, -2, 3, 4, 0, 6}, {2, 3})));
  base.t().select(0, 0).clamp_(-0.5, 0.5);  // column 0
  EXPECT_TRUE(AllClose(base, tensor<float>({-0.5, -2, 3, 0.5, 0, 6}, {2, 3})));
  base.narrow(1, 1, 2).mul_(2);
  EXPECT_TRUE(AllClose(base, tensor<float>({-0.5, -4, 6, 0.5, 0, 12}, {2, 3})));
  base.slice(1, 0, 3, 2).fill_(7);
  EXPECT_TRUE(AllClose(base, tensor<float>({7, -4, 7, 7, 0, 7}, {2, 3})));
  base.select(1, 1).zero_();
  EXPECT_TRUE(AllClose(base, tensor<float>({7, 0, 7, 7, 0, 7}, {2, 3})));
  const uint64_t v = base.version();
  base.t().uniform_(10, 11);
  EXPECT_GT(base.version(), v);
  EXPECT_TRUE(base.ge(10).to_vector<bool>() == std::vector<bool>(6, true));
}

TEST(Elementwise, InPlaceDtypeRules) {
  Tensor i = tensor<int64_t>({1, 2});
  EXPECT_LOOM_ERROR(i.add_(0.5), "add_", "float32", "int64");
  EXPECT_LOOM_ERROR(i.clamp_(0.5), "clamp_", "float32", "int64");
  i.clamp_(2);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  i.relu_();
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  // Narrowing within a category is fine, as in PyTorch.
  Tensor f = tensor<float>({1, 2});
  f.add_(tensor<double>({0.5, 0.25}, {2}));
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(AllClose(f, tensor<float>({1.5, 2.25})));
  Tensor i32 = tensor<int32_t>({1, 2});
  i32.mul_(tensor<int64_t>({3, 4}, {2}));
  EXPECT_EQ(i32.to_vector<int32_t>(), (std::vector<int32_t>{3, 8}));
  EXPECT_LOOM_ERROR(i32.mul_(tensor<float>({1, 1})), "mul_", "float32", "int32");
}

// ---- fills -------------------------------------------------------------------------

TEST(Elementwise, FillsAndRandomFills) {
  Tensor t = empty({1000}, kFloat64);
  t.fill_(2.5);
  EXPECT_TRUE(AllClose(t.sum(), scalar_tensor(2500.0, kFloat64)));
  t.zero_();
  EXPECT_EQ(t.sum().item<double>(), 0);
  manual_seed(7);
  t.uniform_(-2, 3);
  const auto u = t.to_vector<double>();
  double mean = 0;
  for (double v : u) {
    EXPECT_GE(v, -2);
    EXPECT_LT(v, 3);
    mean += v / u.size();
  }
  EXPECT_NEAR(mean, 0.5, 0.15);
  // Seeded: the same sequence again.
  manual_seed(7);
  Tensor t2 = empty({1000}, kFloat64).uniform_(-2, 3);
  EXPECT_TRUE(equal(t, t2));
  Tensor n = empty({20000}, kFloat32).normal_(1, 2);
  const auto nv = n.to_vector<double>();
  double m = 0, var = 0;
  for (double v : nv) m += v / nv.size();
  for (double v : nv) var += (v - m) * (v - m) / nv.size();
  EXPECT_NEAR(m, 1, 0.06);
  EXPECT_NEAR(std::sqrt(var), 2, 0.06);
  Tensor ints = zeros({3}, kInt32);
  ints.fill_(4);
  EXPECT_EQ(ints.to_vector<int32_t>(), (std::vector<int32_t>{4, 4, 4}));
}

TEST(Elementwise, FillErrors) {
  EXPECT_LOOM_ERROR(zeros({2}, kInt64).uniform_(), "uniform_", "floating", "int64");
  EXPECT_LOOM_ERROR(zeros({2}).uniform_(1, 0), "uniform_", "low=1", "high=0");
  EXPECT_LOOM_ERROR(zeros({2}).normal_(0, -1), "normal_", "std=-1");
  Tensor leaf = zeros({2}).requires_grad_();
  EXPECT_LOOM_ERROR(leaf.fill_(1), "fill_", "leaf");
  EXPECT_LOOM_ERROR(leaf.zero_(), "zero_", "leaf");
  EXPECT_LOOM_ERROR(leaf.uniform_(), "uniform_", "leaf");
  EXPECT_LOOM_ERROR(leaf.normal_(), "normal_", "leaf");
  {
    NoGradGuard no_grad;  // nn init
    leaf.normal_(0, 0.01);
    leaf.fill_(3);
  }
  EXPECT_TRUE(AllClose(leaf, tensor<float>({3, 3})));
  EXPECT_TRUE(leaf.requires_grad());
  EXPECT_TRUE(leaf.is_leaf());
}

// ---- errors -----------------------------------------------------------------------

TEST(Elementwise, BroadcastMismatchNamesBothShapes) {
  Tensor a = zeros({2, 3});
  Tensor b = zeros({4});
  EXPECT_LOOM_ERROR(a + b, "add", "[2, 3]", "[4]");
  EXPECT_LOOM_ERROR(maximum(a, b), "maximum", "[2, 3]", "[4]");
  EXPECT_LOOM_ERROR(a.pow(b), "pow", "[2, 3]", "[4]");
  EXPECT_LOOM_ERROR(where(zeros({5}, kBool), a, a), "where", "[5]", "[2, 3]");
  EXPECT_LOOM_ERROR(a.add_(zeros({2, 1, 3})), "add", "[2, 3]");
}

TEST(Elementwise, CrossDeviceNamesBothDevices) {
  Tensor a = zeros({2});
  Tensor b = zeros({2}, TensorOptions().device(Device("cpu:1")));
  EXPECT_LOOM_ERROR(a * b, "mul", "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(maximum(a, b), "maximum", "cpu:1");
  EXPECT_LOOM_ERROR(where(a.gt(0), a, b), "where", "cpu:1");
  EXPECT_LOOM_ERROR(a.add_(b), "add", "cpu:1");
  EXPECT_LOOM_ERROR(allclose(a, b), "isclose", "cpu:1");
  // Ops on one non-default CPU device stay there.
  Tensor c = (b + 1).exp();
  EXPECT_EQ(c.device(), Device("cpu:1"));
  EXPECT_TRUE(AllClose(c.cpu(), tensor<float>({std::exp(1.f), std::exp(1.f)})));
}

TEST(Elementwise, BoolArithmeticIsRejected) {
  Tensor b = tensor<bool>({true, false});
  EXPECT_LOOM_ERROR(b + b, "add", "bool");
  EXPECT_LOOM_ERROR(b - b, "sub", "bool");
  EXPECT_LOOM_ERROR(b.add_(b), "add", "bool");
  EXPECT_LOOM_ERROR(-b, "neg", "bool");
  EXPECT_LOOM_ERROR(b.abs(), "abs", "bool");
  EXPECT_LOOM_ERROR(b.relu(), "relu", "bool");
  EXPECT_LOOM_ERROR(b.clamp(0, 1), "clamp", "bool");
  // Logical mul, and comparisons, are fine.
  EXPECT_EQ((b * b).to_vector<bool>(), (std::vector<bool>{true, false}));
}

TEST(Elementwise, OtherArgumentErrors) {
  Tensor x = tensor<float>({1, 2});
  EXPECT_LOOM_ERROR(x.clamp(std::nullopt, std::nullopt), "clamp", "min", "max");
  EXPECT_LOOM_ERROR(where(x, x, x), "where", "condition", "bool", "float32");
  EXPECT_LOOM_ERROR(tensor<int64_t>({2}).pow(-1), "pow", "negative", "int64");
  EXPECT_LOOM_ERROR(Tensor() + x, "add", "self", "undefined");
  EXPECT_LOOM_ERROR(x.exp() * Tensor(), "mul", "other", "undefined");
  EXPECT_LOOM_ERROR(Tensor().sigmoid(), "sigmoid", "undefined");
}

}  // namespace
}  // namespace loom
