// Counter-based fills of large tensors (tensor/native/CounterRandom.h):
// the same values for any intra-op thread count, a seed fixes them, the
// generator advances by exactly one draw, the distributions are right
// (moments and tail fractions over a million draws), small fills keep the
// Generator's own sequence, and every floating dtype is filled.
#include <cmath>
#include <cstring>

#include "tests/TestUtil.h"

namespace loom {
namespace {

constexpr int64_t kLarge = 1000001;  // odd: the last pair is half used

// Same shape, dtype and every element bit for bit.
bool same(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

Tensor with_threads(int threads, const std::function<Tensor()>& make) {
  const int saved = get_num_threads();
  set_num_threads(threads);
  manual_seed(42);
  Tensor t = make();
  set_num_threads(saved);
  return t;
}

void expect_same_for_any_thread_count(const std::function<Tensor()>& make, const char* what) {
  const Tensor one = with_threads(1, make);
  const Tensor two = with_threads(2, make);
  const Tensor four = with_threads(4, make);
  ASSERT_EQ(one.sizes(), two.sizes()) << what;
  EXPECT_TRUE(same(one, two)) << what;
  EXPECT_TRUE(same(one, four)) << what;
}

TEST(CounterRandom, SameValuesForAnyThreadCount) {
  expect_same_for_any_thread_count([] { return randn({kLarge}); }, "randn");
  expect_same_for_any_thread_count([] { return rand({1000, 1001}); }, "rand");
  expect_same_for_any_thread_count([] { return empty({kLarge}).normal_(2.0, 3.0); }, "normal_");
  expect_same_for_any_thread_count([] { return empty({kLarge}).uniform_(-1.0, 1.0); },
                                   "uniform_");
}

TEST(CounterRandom, SeedFixesValuesAndGeneratorAdvancesOneDraw) {
  Generator a(7), b(7), c(8);
  const Tensor x = randn({kLarge}, {}, &a);
  const Tensor y = randn({kLarge}, {}, &b);
  const Tensor z = randn({kLarge}, {}, &c);
  EXPECT_TRUE(same(x, y));
  EXPECT_FALSE(same(x, z));
  Generator reference(7);
  reference.next_u64();
  EXPECT_EQ(a.next_u64(), reference.next_u64());
  // Two successive large fills differ.
  EXPECT_FALSE(same(randn({kLarge}, {}, &b), x));
}

TEST(CounterRandom, SmallFillsKeepTheGeneratorSequence) {
  Generator g(5), reference(5);
  const Tensor t = randn({1000}, TensorOptions(kFloat64), &g);
  const double* p = static_cast<const double*>(t.data_ptr());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], reference.normal()) << "element " << i;
}

// Moments and tails of 1,000,001 draws: standard errors are ~0.001.
TEST(CounterRandom, NormalHasTheRightDistribution) {
  manual_seed(1);
  const Tensor z = randn({kLarge}, TensorOptions(kFloat64));
  EXPECT_NEAR(z.mean().item<double>(), 0.0, 0.005);
  EXPECT_NEAR(z.std().item<double>(), 1.0, 0.005);
  EXPECT_NEAR((z > 1.959964).to(kFloat64).mean().item<double>(), 0.025, 0.001);
  EXPECT_NEAR((z < -1.959964).to(kFloat64).mean().item<double>(), 0.025, 0.001);
  EXPECT_NEAR((z.abs() < 0.674490).to(kFloat64).mean().item<double>(), 0.5, 0.002);
  // Neighbours (the two halves of a Box-Muller pair) are uncorrelated.
  const Tensor even = z.slice(0, 0, kLarge - 1, 2), odd = z.slice(0, 1, kLarge, 2);
  EXPECT_NEAR((even * odd).mean().item<double>(), 0.0, 0.005);
  const Tensor w = empty({kLarge}, kFloat64).normal_(2.0, 3.0);
  EXPECT_NEAR(w.mean().item<double>(), 2.0, 0.015);
  EXPECT_NEAR(w.std().item<double>(), 3.0, 0.015);
}

TEST(CounterRandom, UniformHasTheRightDistribution) {
  manual_seed(2);
  const Tensor u = rand({kLarge}, TensorOptions(kFloat64));
  EXPECT_GE(u.min().item<double>(), 0.0);
  EXPECT_LT(u.max().item<double>(), 1.0);
  EXPECT_NEAR(u.mean().item<double>(), 0.5, 0.002);
  EXPECT_NEAR(u.var().item<double>(), 1.0 / 12.0, 0.001);
  for (double q : {0.1, 0.5, 0.9})
    EXPECT_NEAR((u < q).to(kFloat64).mean().item<double>(), q, 0.002) << q;
  const Tensor v = empty({kLarge}).uniform_(-3.0, 5.0);
  EXPECT_GE(v.min().item<float>(), -3.0f);
  EXPECT_LE(v.max().item<float>(), 5.0f);
  EXPECT_NEAR(v.mean().item<float>(), 1.0, 0.01);
}

TEST(CounterRandom, EveryFloatingDType) {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    Generator a(3), b(3);
    const Tensor x = randn({kLarge}, TensorOptions(dtype), &a);
    const Tensor y = randn({kLarge}, TensorOptions(kFloat64), &b);
    ASSERT_EQ(x.dtype(), dtype);
    // The same draws rounded to the dtype.
    EXPECT_TRUE(same(x, y.to(dtype))) << dtype_name(dtype);
  }
}

TEST(CounterRandom, NonContiguousAndErrors) {
  manual_seed(4);
  Tensor t = zeros({1000, 200}).t();  // non-contiguous: filled through a copy
  t.normal_(0.0, 1.0);
  EXPECT_NEAR(t.mean().item<float>(), 0.0, 0.01);
  EXPECT_NEAR(t.std().item<float>(), 1.0, 0.01);
  EXPECT_LOOM_ERROR(randn({-1, 100000}), "randn", "negative size");
  EXPECT_LOOM_ERROR(rand({100000}, TensorOptions(kInt64)), "rand", "floating");
}

}  // namespace
}  // namespace loom
