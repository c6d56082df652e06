// Finite-difference gradchecks for conv2d: stride, padding, dilation,
// groups, with and without bias, unbatched and non-contiguous inputs.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::GradOk;
using testing::random_leaf;
using Inputs = std::vector<Tensor>;

TEST(ConvGrad, Stride2Padding1WithBias) {
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return conv2d(x[0], x[1], x[2], {2, 2}, {1, 1}); },
      {random_leaf({2, 2, 5, 5}, 1), random_leaf({3, 2, 3, 3}, 2), random_leaf({3}, 3)}));
}

TEST(ConvGrad, Dilation2NoBias) {
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return conv2d(x[0], x[1], Tensor(), {1, 1}, {1, 2}, {2, 2}); },
      {random_leaf({1, 2, 6, 5}, 4), random_leaf({2, 2, 2, 3}, 5)}));
}

TEST(ConvGrad, Groups2) {
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return conv2d(x[0], x[1], x[2], {1, 2}, {1, 0}, {1, 1}, 2); },
      {random_leaf({2, 4, 4, 5}, 6), random_leaf({4, 2, 2, 2}, 7), random_leaf({4}, 8)}));
}

TEST(ConvGrad, OneByOneAndUnbatched) {
  EXPECT_TRUE(GradOk([](const Inputs& x) { return conv2d(x[0], x[1], x[2]); },
                     {random_leaf({2, 3, 3, 3}, 9), random_leaf({2, 3, 1, 1}, 10),
                      random_leaf({2}, 11)}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return conv2d(x[0], x[1], Tensor(), {1}, {1}); },
                     {random_leaf({2, 4, 4}, 12), random_leaf({2, 2, 3, 3}, 13)}));
}

TEST(ConvGrad, NonContiguousInputAndWeight) {
  // (1, 2, 4, 4) as a permuted view of (1, 4, 4, 2); weight as a transposed view.
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return conv2d(x[0], x[1], Tensor(), {1, 1}, {1, 1}); },
      {random_leaf({1, 4, 4, 2}, 14).permute({0, 3, 1, 2}),
       random_leaf({2, 2, 3, 3}, 15).transpose(0, 1)}));
}

TEST(ConvGrad, OnlyWeightRequiresGrad) {
  const Tensor x = random_leaf({2, 1, 5, 5}, 16).detach();
  Tensor w = random_leaf({2, 1, 3, 3}, 17);
  const Tensor y = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  y.sum().backward();
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(x.requires_grad());
  EXPECT_TRUE(GradOk(
      [&](const Inputs& in) { return conv2d(x, in[0], Tensor(), {1, 1}, {1, 1}); }, {w}));
}

}  // namespace
}  // namespace loom
