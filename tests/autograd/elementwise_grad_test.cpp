// Gradchecks (finite differences, float64) for every differentiable
// elementwise op, with broadcast and non-contiguous inputs, plus hand-computed
// gradients and second derivatives where the rule saves an input.
#include <cmath>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;
using Inputs = std::vector<Tensor>;

// A float64 leaf with values in [0.5, 1.5), for log/sqrt/rsqrt/pow bases.
Tensor positive_leaf(IntList sizes, uint64_t seed) {
  return (random_leaf(std::move(sizes), seed).detach() * 0.5 + 1.0).requires_grad_();
}

// d/dx of sum(f(x)) as a differentiable function of x (for second
// derivatives); grad mode on even inside gradcheck's no-grad evaluations.
Tensor grad_of_sum(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  autograd::AutoGradMode enable(true);
  return autograd::grad({f(x).sum()}, {x}, {}, true, true)[0];
}

// ---- binary ---------------------------------------------------------------------

TEST(ElementwiseGrad, AddSubBroadcastAndAlpha) {
  Tensor a = random_leaf({2, 3}, 1), b = random_leaf({3}, 2), c = random_leaf({2, 1}, 3);
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].add(x[1], 2.5) - x[2]; }, {a, b, c}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].sub(x[1], -3) + 1.0; }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return 2.0 - x[0]; }, {a}));
}

TEST(ElementwiseGrad, MulDivNonContiguous) {
  Tensor a = random_leaf({3, 2}, 4), b = random_leaf({2, 3}, 5);
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].t() * x[1]; }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[1] / (x[0].t() + 3.0); }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return 1.0 / (x[0] + 2.0); }, {a}));
}

TEST(ElementwiseGrad, MixedDtypeGradientsKeepInputDtype) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  Tensor b = tensor<double>({3, 4}, {2}).requires_grad_();
  Tensor y = a * b;
  ASSERT_EQ(y.dtype(), kFloat64);
  y.sum().backward();
  EXPECT_EQ(a.grad().dtype(), kFloat32);
  EXPECT_TRUE(AllClose(a.grad(), tensor<float>({3, 4})));
  EXPECT_TRUE(AllClose(b.grad(), tensor<double>({1, 2})));
  // A second pass accumulates into the float32 .grad.
  (a + b).sum().backward();
  EXPECT_TRUE(AllClose(a.grad(), tensor<float>({4, 5})));
}

TEST(ElementwiseGrad, PowTensorExponent) {
  Tensor base = positive_leaf({2, 3}, 6), ex = random_leaf({3}, 7);
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].pow(x[1]); }, {base, ex}));
  Tensor base_t = positive_leaf({3, 2}, 8);
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].t().pow(x[1] * 2.0); }, {base_t, ex}));
  // Hand-computed: d(a^b)/da = b a^(b-1), d/db = a^b ln a.
  Tensor a = tensor<double>({2, 3}, {2}).requires_grad_();
  Tensor b = tensor<double>({3, 2}, {2}).requires_grad_();
  a.pow(b).sum().backward();
  EXPECT_TRUE(AllClose(a.grad(), tensor<double>({12, 6})));
  EXPECT_TRUE(AllClose(b.grad(), tensor<double>({8 * std::log(2.0), 9 * std::log(3.0)})));
}

TEST(ElementwiseGrad, PowTensorZeroBaseGivesZeroExponentGradient) {
  Tensor a = tensor<double>({0, 2}, {2}).requires_grad_();
  Tensor b = tensor<double>({2, 1}, {2}).requires_grad_();
  a.pow(b).sum().backward();
  const auto gb = b.grad().to_vector<double>();
  EXPECT_EQ(gb[0], 0);  // not 0 * log(0) = nan
  EXPECT_NEAR(gb[1], 2 * std::log(2.0), 1e-12);
}

TEST(ElementwiseGrad, MaximumMinimum) {
  Tensor a = random_leaf({2, 3}, 9), b = random_leaf({3}, 10), c = random_leaf({3, 2}, 11);
  EXPECT_TRUE(GradOk([](const Inputs& x) { return maximum(x[0], x[1]); }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return minimum(x[0], x[1]); }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return maximum(x[1].t(), x[0]); }, {a, c}));
  // Ties split the gradient evenly.
  Tensor p = tensor<double>({1, 5, 3}, {3}).requires_grad_();
  Tensor q = tensor<double>({1, 2, 4}, {3}).requires_grad_();
  maximum(p, q).sum().backward();
  EXPECT_TRUE(AllClose(p.grad(), tensor<double>({0.5, 1, 0})));
  EXPECT_TRUE(AllClose(q.grad(), tensor<double>({0.5, 0, 1})));
}

TEST(ElementwiseGrad, WhereWithBroadcasting) {
  Tensor cond = tensor<bool>({true, false, true});  // [3]
  Tensor a = random_leaf({2, 1}, 12), b = random_leaf({2, 3}, 13);
  EXPECT_TRUE(GradOk([&](const Inputs& x) { return where(cond, x[0], x[1]); }, {a, b}));
  Tensor c = random_leaf({3, 2}, 14);
  EXPECT_TRUE(GradOk([](const Inputs& x) { return where(x[0].t().gt(0), x[0].t(), x[1] * 3.0); },
                     {c, b}));
  // Hand-computed: a [2,1] collects the gradient of two selected columns per row.
  where(cond, a, b).sum().backward();
  EXPECT_TRUE(AllClose(a.grad(), tensor<double>({2, 2}, {2, 1})));
  EXPECT_TRUE(AllClose(b.grad(), tensor<double>({0, 1, 0, 0, 1, 0}, {2, 3})));
}

// ---- unary ----------------------------------------------------------------------

TEST(ElementwiseGrad, NegAbsExp) {
  Tensor a = random_leaf({2, 3}, 15), t = random_leaf({3, 2}, 16);
  EXPECT_TRUE(GradOk([](const Inputs& x) { return -x[0]; }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].neg() * x[1].t(); }, {a, t}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].abs(); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].t().abs(); }, {t}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].exp(); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].t().exp() + x[1]; }, {t, a}));
}

TEST(ElementwiseGrad, LogSqrtRsqrt) {
  Tensor p = positive_leaf({2, 3}, 17), pt = positive_leaf({3, 2}, 18);
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].log(); }, {p}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].t().log(); }, {pt}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].sqrt(); }, {p}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].t().sqrt(); }, {pt}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].rsqrt(); }, {p}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].t().rsqrt() * x[1]; }, {pt, p}));
}

TEST(ElementwiseGrad, PowScalar) {
  Tensor a = random_leaf({2, 3}, 19), p = positive_leaf({3, 2}, 20);
  for (double e : {0.0, 1.0, 2.0, 3.0, -1.0}) {
    EXPECT_TRUE(GradOk([e](const Inputs& x) { return (x[0] + 2.0).pow(e); }, {a})) << "e=" << e;
  }
  for (double e : {0.5, -0.5, 1.7, -2.3}) {
    EXPECT_TRUE(GradOk([e](const Inputs& x) { return x[0].t().pow(e); }, {p})) << "e=" << e;
  }
  // Hand-computed: d(x^3)/dx = 3x^2.
  Tensor x = tensor<double>({1, -2}, {2}).requires_grad_();
  x.pow(3).sum().backward();
  EXPECT_TRUE(AllClose(x.grad(), tensor<double>({3, 12})));
}

TEST(ElementwiseGrad, ReluSigmoidTanh) {
  Tensor a = random_leaf({2, 3}, 21), t = random_leaf({3, 2}, 22);
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].relu(); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].t().relu() * x[1]; }, {t, a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].sigmoid(); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].t().sigmoid(); }, {t}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].tanh(); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return (x[0].t() * 3.0).tanh(); }, {t}));
  // Hand-computed relu: 1 where x > 0.
  Tensor x = tensor<double>({-1, 2, 0.5, -0.1}, {4}).requires_grad_();
  (x.relu() * 3.0).sum().backward();
  EXPECT_TRUE(AllClose(x.grad(), tensor<double>({0, 3, 3, 0})));
}

TEST(ElementwiseGrad, ClampBothOneSided) {
  Tensor a = random_leaf({2, 3}, 23), t = random_leaf({3, 2}, 24);
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].clamp(-0.3, 0.4); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].clamp(-0.3); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].clamp(std::nullopt, 0.2); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].t().clamp(-0.5, 0.5); }, {t}));
  // Hand-computed: the gradient passes inside [min, max], bounds included.
  Tensor x = tensor<double>({-2, -1, 0, 1, 2}, {5}).requires_grad_();
  x.clamp(-1, 1).sum().backward();
  EXPECT_TRUE(AllClose(x.grad(), tensor<double>({0, 1, 1, 1, 0})));
}

// ---- in place ----------------------------------------------------------------------

TEST(ElementwiseGrad, InPlaceReluAndClampOnNonLeaf) {
  Tensor a = random_leaf({2, 3}, 25), t = random_leaf({3, 2}, 26);
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) {
        Tensor y = x[0] * 2.0;
        y.relu_();
        return y * x[0];
      },
      {a}));
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) {
        Tensor y = x[0].t() + x[1];
        y.clamp_(-0.5, 0.6);
        return y;
      },
      {t, a}));
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) {
        Tensor y = x[0] + 0.0;
        y.clamp_(std::nullopt, 0.1);
        return y.exp();
      },
      {a}));
}

TEST(ElementwiseGrad, InPlaceRecordsHistory) {
  Tensor x = tensor<double>({-0.2, 2, 0.7}, {3}).requires_grad_();
  Tensor y = x * 1.0;
  y.clamp_(-0.5, 1.5);  // saves its input: later in-place ops on y are fine
  EXPECT_EQ(y.grad_fn()->name(), "ClampBackward");
  y.relu_();
  EXPECT_EQ(y.grad_fn()->name(), "ReluBackward");
  EXPECT_TRUE(AllClose(y, tensor<double>({0, 1.5, 0.7})));
  y.sum().backward();
  EXPECT_TRUE(AllClose(x.grad(), tensor<double>({0, 0, 1})));  // -0.2 cut by relu, 2 by clamp
}

TEST(ElementwiseGrad, InPlaceAfterReluInPlaceIsCaught) {
  // relu_ saves its output (as PyTorch does), so writing it again is an error.
  Tensor x = tensor<double>({-1, 2}, {2}).requires_grad_();
  Tensor y = x * 1.0;
  y.relu_();
  y.mul_(2.0);
  EXPECT_LOOM_ERROR(y.sum().backward(), "modified by an inplace operation", "ReluBackward");
}

TEST(ElementwiseGrad, InPlaceOnLeafThrows) {
  Tensor leaf = random_leaf({3}, 27);
  EXPECT_LOOM_ERROR(leaf.relu_(), "relu_", "leaf");
  EXPECT_LOOM_ERROR(leaf.clamp_(0, 1), "clamp_", "leaf");
  NoGradGuard no_grad;
  leaf.clamp_(0, 0);
  EXPECT_TRUE(AllClose(leaf, zeros({3}, kFloat64)));
}

TEST(ElementwiseGrad, ModifyingSavedOutputIsCaught) {
  Tensor x = random_leaf({3}, 28);
  Tensor y = x.exp();  // saves its output
  Tensor z = y.sum();
  y.mul_(2.0);
  EXPECT_LOOM_ERROR(z.backward(), "modified by an inplace operation", "ExpBackward");
}

TEST(ElementwiseGrad, FillOnNonLeafCutsTheGradient) {
  Tensor x = tensor<double>({1, 2}, {2}).requires_grad_();
  Tensor y = x * 3.0;
  y.fill_(5);
  Tensor z = (y * x).sum();  // d/dx = y (constant 5), none through y
  z.backward();
  EXPECT_TRUE(AllClose(x.grad(), tensor<double>({5, 5})));
}

// ---- second derivatives -------------------------------------------------------------

TEST(ElementwiseGrad, SecondDerivativesOfInputSavingRules) {
  Tensor a = random_leaf({2, 3}, 29), p = positive_leaf({2, 3}, 30);
  // d/dx sum(x^3) = 3x^2; its gradient 6x.
  EXPECT_TRUE(GradOk([](const Inputs& x) { return grad_of_sum([](const Tensor& t) { return t.pow(3); }, x[0]); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return grad_of_sum([](const Tensor& t) { return t.log(); }, x[0]); }, {p}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return grad_of_sum([](const Tensor& t) { return t.abs() * t; }, x[0]); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return grad_of_sum([](const Tensor& t) { return t.clamp(-0.5, 0.5) * t; }, x[0]); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return grad_of_sum([](const Tensor& t) { return t.relu() * t; }, x[0]); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return grad_of_sum([](const Tensor& t) { return where(t.gt(0), t * t, t * 3.0); }, x[0]); }, {a}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return grad_of_sum([](const Tensor& t) { return maximum(t, t * t) * t; }, x[0]); }, {a}));
  Tensor x = tensor<double>({1, -2}, {2}).requires_grad_();
  Tensor g = grad_of_sum([](const Tensor& t) { return t.pow(3); }, x);
  EXPECT_TRUE(AllClose(g, tensor<double>({3, 12})));
  g.sum().backward();
  EXPECT_TRUE(AllClose(x.grad(), tensor<double>({6, -12})));
}

}  // namespace
}  // namespace loom
