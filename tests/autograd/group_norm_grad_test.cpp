// Finite-difference gradchecks for group_norm in input, weight and bias (one
// group, one group per channel, and between; (N, C) to 5-D inputs; with and
// without affine parameters; strided inputs), and of its double backward:
// under create_graph the gradients are differentiable ops, checked by
// gradcheck on the first derivative, and equal to the fused kernel's.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;
using Inputs = std::vector<Tensor>;

// sum(group_norm(x) * r) has gradient 0 in x; a random weighting r does not.
Tensor weighted(const Tensor& y, uint64_t seed) {
  return y * random_leaf(y.sizes(), seed).detach();
}

TEST(GroupNormGrad, OneGroup) {
  EXPECT_TRUE(
      GradOk([](const Inputs& x) { return weighted(group_norm(x[0], 1, x[1], x[2], 1e-5), 10); },
             {random_leaf({2, 3, 4}, 1), random_leaf({3}, 2), random_leaf({3}, 3)}));
}

TEST(GroupNormGrad, OneGroupPerChannel) {
  EXPECT_TRUE(
      GradOk([](const Inputs& x) { return weighted(group_norm(x[0], 4, x[1], x[2], 1e-5), 11); },
             {random_leaf({2, 4, 2, 2}, 4), random_leaf({4}, 5), random_leaf({4}, 6)}));
}

TEST(GroupNormGrad, GroupsOfSeveralChannels) {
  EXPECT_TRUE(
      GradOk([](const Inputs& x) { return weighted(group_norm(x[0], 2, x[1], x[2], 1e-5), 12); },
             {random_leaf({2, 6, 3}, 7), random_leaf({6}, 8), random_leaf({6}, 9)}));
  EXPECT_TRUE(
      GradOk([](const Inputs& x) { return weighted(group_norm(x[0], 2, x[1], x[2], 1e-5), 13); },
             {random_leaf({1, 4, 2, 1, 2}, 14), random_leaf({4}, 15), random_leaf({4}, 16)}));
}

TEST(GroupNormGrad, TwoDimensionalInputAndNoAffine) {
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return weighted(group_norm(x[0], 2, Tensor(), Tensor(), 1e-3), 17); },
      {random_leaf({3, 6}, 18)}));
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return weighted(group_norm(x[0], 3, Tensor(), x[1], 1e-5), 19); },
      {random_leaf({2, 3, 5}, 20), random_leaf({3}, 21)}));
}

TEST(GroupNormGrad, StridedInput) {
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return weighted(group_norm(x[0], 2, x[1], x[2], 1e-5), 22); },
      {random_leaf({2, 3, 4}, 23).permute({0, 2, 1}), random_leaf({4}, 24), random_leaf({4}, 25)}));
}

// The first derivative, built with create_graph, as a function of the inputs
// (grad mode forced on: gradcheck's finite differences call it under no_grad).
Tensor first_derivative(const Inputs& x, int64_t groups) {
  autograd::AutoGradMode grad_mode(true);
  const Tensor y = weighted(group_norm(x[0], groups, x[1], x[2], 1e-5), 30);
  const std::vector<Tensor> g = autograd::grad({y.sum()}, {x[0], x[1]}, {}, true, true);
  return (g[0] * random_leaf(g[0].sizes(), 31).detach()).sum() +
         (g[1] * random_leaf(g[1].sizes(), 32).detach()).sum();
}

TEST(GroupNormGrad, DoubleBackward) {
  EXPECT_TRUE(GradOk([](const Inputs& x) { return first_derivative(x, 2); },
                     {random_leaf({2, 4, 3}, 26), random_leaf({4}, 27), random_leaf({4}, 28)}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return first_derivative(x, 1); },
                     {random_leaf({2, 3}, 29), random_leaf({3}, 33), random_leaf({3}, 34)}));
}

TEST(GroupNormGrad, CreateGraphGivesTheKernelsGradients) {
  const Tensor x = random_leaf({3, 6, 2, 2}, 40), w = random_leaf({6}, 41),
               b = random_leaf({6}, 42);
  const Tensor r = random_leaf({3, 6, 2, 2}, 43).detach();
  const Tensor loss = (group_norm(x, 3, w, b, 1e-5) * r).sum();
  const std::vector<Tensor> fused = autograd::grad({loss}, {x, w, b}, {}, true, false);
  const std::vector<Tensor> composed = autograd::grad({loss}, {x, w, b}, {}, true, true);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(fused[i].requires_grad()) << i;
    EXPECT_TRUE(AllClose(composed[i], fused[i], 1e-10, 1e-12)) << "input " << i;
  }
  EXPECT_TRUE(composed[0].requires_grad());
}

TEST(GroupNormGrad, RecordsItsNode) {
  const Tensor y = group_norm(random_leaf({2, 4}, 50), 2);
  ASSERT_TRUE(y.grad_fn() != nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "GroupNormBackward");
  EXPECT_FALSE(group_norm(random_leaf({2, 4}, 51).detach(), 2).requires_grad());
}

}  // namespace
}  // namespace loom
