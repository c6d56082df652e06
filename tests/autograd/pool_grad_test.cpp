// Finite-difference gradchecks for max/avg/adaptive pooling.  max_pool2d
// inputs are distinct random values (no ties in any window).
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::GradOk;
using testing::random_leaf;
using Inputs = std::vector<Tensor>;

TEST(PoolGrad, MaxPool) {
  EXPECT_TRUE(GradOk([](const Inputs& x) { return max_pool2d(x[0], {2, 2}); },
                     {random_leaf({2, 2, 4, 4}, 1)}));
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, {1, 1}, true); },
      {random_leaf({1, 2, 5, 6}, 2)}));
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return max_pool2d(x[0], {2, 2}, {1, 1}, {0, 0}, {2, 1}); },
      {random_leaf({2, 5, 4}, 3)}));
  // Non-contiguous input.
  EXPECT_TRUE(GradOk([](const Inputs& x) { return max_pool2d(x[0], {2, 2}); },
                     {random_leaf({1, 4, 4, 2}, 4).permute({0, 3, 1, 2})}));
}

TEST(PoolGrad, MaxPoolWithIndicesOutputGrad) {
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) { return std::get<0>(max_pool2d_with_indices(x[0], {2, 3}, {1, 2})); },
      {random_leaf({1, 1, 4, 7}, 5)}));
}

TEST(PoolGrad, AvgPool) {
  for (bool include : {true, false}) {
    EXPECT_TRUE(GradOk(
        [&](const Inputs& x) { return avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, false, include); },
        {random_leaf({1, 2, 5, 5}, 6)}));
    EXPECT_TRUE(GradOk(
        [&](const Inputs& x) { return avg_pool2d(x[0], {2, 2}, {2, 2}, {1, 1}, true, include); },
        {random_leaf({2, 5, 4}, 7)}));
  }
  EXPECT_TRUE(GradOk([](const Inputs& x) { return avg_pool2d(x[0], {2, 2}, {}, {0, 0}, true); },
                     {random_leaf({1, 1, 5, 5}, 8)}));
}

TEST(PoolGrad, AdaptiveAvgPool) {
  EXPECT_TRUE(GradOk([](const Inputs& x) { return adaptive_avg_pool2d(x[0], {3, 3}); },
                     {random_leaf({1, 2, 5, 5}, 9)}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return adaptive_avg_pool2d(x[0], {2, 3}); },
                     {random_leaf({2, 5, 7}, 10)}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return adaptive_avg_pool2d(x[0], {1, 1}); },
                     {random_leaf({2, 2, 3, 3}, 11)}));
}

}  // namespace
}  // namespace loom
