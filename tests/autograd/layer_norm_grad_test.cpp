// Finite-difference gradchecks for layer_norm in input, weight and bias
// (normalized_shape of one and two dims, rows of one value, with and without
// affine parameters, strided inputs), and of its double backward: under
// create_graph the gradients are differentiable ops, checked by gradcheck on
// the first derivative, and equal to the fused kernel's.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;
using Inputs = std::vector<Tensor>;

// sum(layer_norm(x) * r) has gradient 0 in x; a random weighting r does not.
Tensor weighted(const Tensor& y, uint64_t seed) {
  return y * random_leaf(y.sizes(), seed).detach();
}

TEST(LayerNormGrad, InputWeightBiasOneDim) {
  EXPECT_TRUE(
      GradOk([](const Inputs& x) { return weighted(layer_norm(x[0], {5}, x[1], x[2], 1e-5), 10); },
             {random_leaf({3, 5}, 1), random_leaf({5}, 2), random_leaf({5}, 3)}));
}

TEST(LayerNormGrad, InputWeightBiasTwoDims) {
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) {
        return weighted(layer_norm(x[0], {3, 4}, x[1], x[2], 1e-5), 11);
      },
      {random_leaf({2, 3, 4}, 4), random_leaf({3, 4}, 5), random_leaf({3, 4}, 6)}));
}

TEST(LayerNormGrad, WholeTensorAndNoAffine) {
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) {
        return weighted(layer_norm(x[0], {2, 3}, Tensor(), Tensor(), 1e-3), 12);
      },
      {random_leaf({2, 3}, 7)}));
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return weighted(layer_norm(x[0], {4}, x[1], Tensor(), 1e-5), 13); },
      {random_leaf({2, 2, 4}, 8), random_leaf({4}, 9)}));
}

TEST(LayerNormGrad, RowsOfOneValue) {
  // The output is the bias alone; the gradients in x and weight vanish.
  EXPECT_TRUE(
      GradOk([](const Inputs& x) { return weighted(layer_norm(x[0], {1}, x[1], x[2], 1e-1), 14); },
             {random_leaf({4, 1}, 15), random_leaf({1}, 16), random_leaf({1}, 17)}));
}

TEST(LayerNormGrad, StridedInput) {
  EXPECT_TRUE(
      GradOk([](const Inputs& x) { return weighted(layer_norm(x[0], {3}, x[1], x[2], 1e-5), 18); },
             {random_leaf({3, 4}, 19).t(), random_leaf({3}, 20), random_leaf({3}, 21)}));
}

// The first derivative, built with create_graph, as a function of the inputs
// (grad mode forced on: gradcheck's finite differences call it under no_grad).
Tensor first_derivative(const Inputs& x, const IntList& shape) {
  autograd::AutoGradMode grad_mode(true);
  const Tensor y = weighted(layer_norm(x[0], shape, x[1], x[2], 1e-5), 30);
  const std::vector<Tensor> g = autograd::grad({y.sum()}, {x[0], x[1]}, {}, true, true);
  return (g[0] * random_leaf(g[0].sizes(), 31).detach()).sum() +
         (g[1] * random_leaf(g[1].sizes(), 32).detach()).sum();
}

TEST(LayerNormGrad, DoubleBackward) {
  EXPECT_TRUE(GradOk([](const Inputs& x) { return first_derivative(x, {4}); },
                     {random_leaf({3, 4}, 22), random_leaf({4}, 23), random_leaf({4}, 24)}));
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) {
        return first_derivative(x, {2, 3});
      },
      {random_leaf({2, 2, 3}, 25), random_leaf({2, 3}, 26), random_leaf({2, 3}, 27)}));
}

TEST(LayerNormGrad, CreateGraphGivesTheKernelsGradients) {
  const Tensor x = random_leaf({4, 6}, 40), w = random_leaf({6}, 41), b = random_leaf({6}, 42);
  const Tensor r = random_leaf({4, 6}, 43).detach();
  const Tensor loss = (layer_norm(x, {6}, w, b, 1e-5) * r).sum();
  const std::vector<Tensor> fused = autograd::grad({loss}, {x, w, b}, {}, true, false);
  const std::vector<Tensor> composed = autograd::grad({loss}, {x, w, b}, {}, true, true);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(fused[i].requires_grad()) << i;
    EXPECT_TRUE(AllClose(composed[i], fused[i], 1e-10, 1e-12)) << "input " << i;
  }
  EXPECT_TRUE(composed[0].requires_grad());
  EXPECT_TRUE(composed[1].requires_grad());
}

TEST(LayerNormGrad, NoGraphWithoutGrad) {
  const Tensor x = random_leaf({2, 3}, 50).detach();
  EXPECT_FALSE(layer_norm(x, {3}).requires_grad());
  const Tensor w = random_leaf({3}, 51);
  const Tensor y = layer_norm(x, {3}, w);
  ASSERT_TRUE(y.grad_fn() != nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "LayerNormBackward");
  {
    autograd::NoGradGuard no_grad;
    EXPECT_FALSE(layer_norm(x, {3}, w).requires_grad());
  }
}

}  // namespace
}  // namespace loom
