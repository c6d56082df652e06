// nn::Dropout as a module: active only in training mode (train/eval, also
// through a parent), kept elements scaled by 1 / (1 - p), the dropped
// fraction within statistical bounds of p for several p, masks independent
// between elements and between calls yet reproducible under manual_seed,
// p = 0 and p = 1 exact, gradients equal to the mask, and p outside [0, 1]
// rejected at construction.
#include <cmath>
#include <sstream>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

// Fraction of zeros in y.
double dropped_fraction(const Tensor& y) {
  int64_t zeros_seen = 0;
  for (double v : y.to_vector<double>()) zeros_seen += v == 0.0;
  return static_cast<double>(zeros_seen) / static_cast<double>(y.numel());
}

// Five standard errors of a Bernoulli(p) frequency over n draws.
double five_sigma(double p, int64_t n) { return 5 * std::sqrt(p * (1 - p) / static_cast<double>(n)); }

TEST(DropoutModule, DefaultsAndPrinting) {
  nn::Dropout drop;
  EXPECT_EQ(drop->p, 0.5);
  EXPECT_TRUE(drop->is_training());
  EXPECT_TRUE(drop->parameters().empty());
  EXPECT_TRUE(drop->state_dict().empty());
  std::ostringstream out;
  out << *nn::Dropout(0.25);
  EXPECT_EQ(out.str(), "Dropout(p=0.25)");
}

TEST(DropoutModule, EvalModeIsTheIdentity) {
  nn::Dropout drop(0.5);
  const Tensor x = randn({64, 32});
  drop->eval();
  EXPECT_TRUE(drop(x).is_same(x));
  // Through a parent module too.
  nn::Sequential seq(nn::Linear(32, 16), nn::Dropout(0.9));
  seq->eval();
  const Tensor y1 = seq(x), y2 = seq(x);
  EXPECT_TRUE(AllClose(y1, y2, 0, 0));
  EXPECT_EQ(dropped_fraction(y1), 0.0);
  seq->train();
  EXPECT_GT(dropped_fraction(seq(x)), 0.8);
}

TEST(DropoutModule, KeptElementsAreScaledAndTheRateIsP) {
  for (const double p : {0.1, 0.3, 0.5, 0.9}) {
    for (const DType dtype : {kFloat32, kFloat64}) {
      manual_seed(42);
      nn::Dropout drop(p);
      const int64_t n = 200000;
      const Tensor x = rand({n}, dtype) + 0.5;  // no zeros in the input
      const Tensor y = drop(x);
      EXPECT_EQ(y.sizes(), x.sizes());
      EXPECT_EQ(y.dtype(), dtype);
      const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i)
        if (yv[i] != 0 && std::abs(yv[i] - xv[i] / (1 - p)) > 1e-6 * std::abs(yv[i])) ++bad;
      EXPECT_EQ(bad, 0) << "kept elements must be x / (1 - p), p = " << p;
      EXPECT_NEAR(dropped_fraction(y), p, five_sigma(p, n)) << "p = " << p;
      // Inverted dropout keeps the expectation: mean(y) ~ mean(x).
      const double mean_x = x.mean().item<double>(), mean_y = y.mean().item<double>();
      const double se = std::sqrt(p / (1 - p) * (x * x).mean().item<double>() / n);
      EXPECT_NEAR(mean_y, mean_x, 5 * se + 1e-6) << "p = " << p;
    }
  }
}

TEST(DropoutModule, MasksAreIndependentAcrossElementsAndCalls) {
  manual_seed(7);
  nn::Dropout drop(0.5);
  const int64_t n = 100000;
  const Tensor x = ones({n});
  const auto a = drop(x).to_vector<float>();
  const auto b = drop(x).to_vector<float>();
  // Neighbours dropped together ~ p^2; the same element dropped in two calls ~ p^2.
  int64_t neighbours = 0, both_calls = 0, same = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i + 1 < n) neighbours += a[i] == 0 && a[i + 1] == 0;
    both_calls += a[i] == 0 && b[i] == 0;
    same += (a[i] == 0) == (b[i] == 0);
  }
  EXPECT_NEAR(static_cast<double>(neighbours) / (n - 1), 0.25, five_sigma(0.25, n - 1));
  EXPECT_NEAR(static_cast<double>(both_calls) / n, 0.25, five_sigma(0.25, n));
  EXPECT_LT(same, n);  // the second call drew a new mask
  // Each half of the tensor is dropped at the rate p (no positional pattern).
  EXPECT_NEAR(dropped_fraction(drop(x).narrow(0, 0, n / 2)), 0.5, five_sigma(0.5, n / 2));
  EXPECT_NEAR(dropped_fraction(drop(x).narrow(0, n / 2, n / 2)), 0.5, five_sigma(0.5, n / 2));
}

TEST(DropoutModule, ManualSeedReproducesTheMask) {
  nn::Dropout drop(0.3);
  const Tensor x = randn({1000});
  manual_seed(3);
  const Tensor first = drop(x);
  manual_seed(3);
  EXPECT_TRUE(AllClose(drop(x), first, 0, 0));
  manual_seed(4);
  EXPECT_FALSE(AllClose(drop(x), first, 0, 0));
}

TEST(DropoutModule, ZeroAndOneAreExact) {
  Tensor x = randn({50, 20}).requires_grad_();
  nn::Dropout none(0.0);
  EXPECT_TRUE(AllClose(none(x), x, 0, 0));
  nn::Dropout all(1.0);
  Tensor y = all(x);
  EXPECT_TRUE(AllClose(y, zeros({50, 20}), 0, 0));
  y.sum().backward();
  // The gradient is zero too, not NaN from 1 / (1 - p).
  EXPECT_TRUE(AllClose(x.grad(), zeros({50, 20}), 0, 0));
}

TEST(DropoutModule, GradientIsTheScaledMask) {
  manual_seed(11);
  nn::Dropout drop(0.25);
  Tensor x = (rand({40, 30}, kFloat64) + 0.5).requires_grad_();
  Tensor y = drop(x);
  const Tensor g = randn({40, 30}, kFloat64);
  y.backward(g);
  const Tensor kept = y.detach().ne(0.0).to(kFloat64);
  EXPECT_TRUE(AllClose(x.grad(), g * kept / 0.75, 1e-12, 0));
}

TEST(DropoutModule, NonContiguousInputAndOtherDevices) {
  manual_seed(5);
  nn::Dropout drop(0.4);
  const Tensor base = rand({30, 40}) + 0.5;
  const Tensor x = base.t();  // (40, 30), non-contiguous
  const Tensor y = drop(x);
  EXPECT_EQ(y.sizes(), (IntList{40, 30}));
  const Tensor kept = y.ne(0.0).to(kFloat32);
  EXPECT_TRUE(AllClose(y, x * kept / 0.6f, 1e-6, 0));
  const Tensor on1 = drop(x.to(Device("cpu:1")));
  EXPECT_EQ(on1.device(), Device("cpu:1"));
  EXPECT_NEAR(dropped_fraction(on1), 0.4, five_sigma(0.4, 1200));
}

TEST(DropoutModule, CloneKeepsPAndMode) {
  nn::Dropout drop(0.7);
  drop->eval();
  auto copy = std::dynamic_pointer_cast<nn::DropoutImpl>(drop->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->p, 0.7);
  EXPECT_FALSE(copy->is_training());
}

TEST(DropoutModule, ProbabilityOutsideZeroOneThrows) {
  EXPECT_LOOM_ERROR(nn::Dropout(1.5), "Dropout", "between 0 and 1", "1.5");
  EXPECT_LOOM_ERROR(nn::Dropout(-0.1), "Dropout", "-0.1");
  EXPECT_LOOM_ERROR(nn::Dropout(std::nan("")), "Dropout", "between 0 and 1");
}

}  // namespace
}  // namespace loom
