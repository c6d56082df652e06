// Gradchecks for cat and stack, including non-contiguous inputs, negative
// dims, skipped [0] inputs, promoted dtypes and cross-device errors.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;
using Inputs = std::vector<Tensor>;

TEST(JoinGrad, CatAlongEachDim) {
  Tensor a = random_leaf({2, 3}, 1);
  Tensor b = random_leaf({4, 3}, 2);
  Tensor c = random_leaf({3, 2}, 3).t();  // [2, 3], non-contiguous
  EXPECT_TRUE(GradOk([](const Inputs& in) { return cat({in[0], in[1], in[2]}, 0); }, {a, b, c}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return cat({in[0], in[1]}, -1) * 2.0; }, {a, c}));
  // The same tensor twice: gradients add up.
  EXPECT_TRUE(GradOk([](const Inputs& in) { return cat({in[0], in[0] * in[0]}, 1); }, {a}));
}

TEST(JoinGrad, CatSkipsEmptyAndHandlesInputsWithoutGrad) {
  Tensor a = random_leaf({2, 2}, 4);
  Tensor fixed = ones({1, 2}, kFloat64);  // needs no gradient
  EXPECT_TRUE(GradOk(
      [&](const Inputs& in) { return cat({zeros({0}, kFloat64), in[0], fixed}, 0); }, {a}));
  Tensor y = cat({fixed, a});
  EXPECT_EQ(y.grad_fn()->name(), "CatBackward");
  y.sum().backward();
  EXPECT_TRUE(AllClose(a.grad(), ones({2, 2}, kFloat64)));
  EXPECT_FALSE(fixed.requires_grad());
}

TEST(JoinGrad, CatWithPromotionGivesEachInputItsDtype) {
  Tensor f32 = tensor<float>({1, 2}).requires_grad_();
  Tensor f64 = tensor<double>({3}).view({1}).detach().requires_grad_();
  Tensor y = cat({f32, f64});
  EXPECT_EQ(y.dtype(), kFloat64);
  (y * tensor<double>({10, 20, 30})).sum().backward();
  EXPECT_EQ(f32.grad().dtype(), kFloat32);
  EXPECT_EQ(f32.grad().to_vector<float>(), (std::vector<float>{10, 20}));
  EXPECT_EQ(f64.grad().to_vector<double>(), (std::vector<double>{30}));
}

TEST(JoinGrad, Stack) {
  Tensor a = random_leaf({2, 3}, 5);
  Tensor b = random_leaf({3, 2}, 6).t();
  EXPECT_TRUE(GradOk([](const Inputs& in) { return stack({in[0], in[1]}); }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return stack({in[0], in[1], in[0]}, 1); }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return stack({in[0] * in[1], in[1]}, -1); }, {a, b}));
  EXPECT_EQ(stack({a, b}).grad_fn()->name(), "StackBackward");
}

TEST(JoinGrad, CatAcrossLogicalDevices) {
  Tensor a = random_leaf({2}, 7);
  Tensor b = random_leaf({2}, 8);
  EXPECT_LOOM_ERROR(cat({a, b.to(Device("cpu:1"))}), "cat", "cpu", "cpu:1");
  // Moving first is the way across, and it is differentiable.
  EXPECT_TRUE(GradOk(
      [](const Inputs& in) {
        return cat({in[0].to(Device("cpu:1")), in[1].to(Device("cpu:1"))}).to(Device("cpu"));
      },
      {a, b}));
}

TEST(JoinGrad, SplitThenCatRoundTrips) {
  Tensor x = random_leaf({5, 4}, 9);
  EXPECT_TRUE(GradOk(
      [](const Inputs& in) {
        auto parts = in[0].split(2, 0);
        return cat({parts[2], parts[0] * 2.0, parts[1]}, 0);
      },
      {x}));
}

}  // namespace
}  // namespace loom
