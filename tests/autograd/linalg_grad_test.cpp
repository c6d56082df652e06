// Finite-difference gradchecks for mm, bmm, matmul and linear, including
// transposed (non-contiguous) leaves and broadcast batch dims.
#include <tuple>
#include <vector>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::GradOk;
using testing::random_leaf;
using Inputs = std::vector<Tensor>;

TEST(LinalgGrad, Mm) {
  EXPECT_TRUE(GradOk([](const Inputs& x) { return mm(x[0], x[1]); },
                     {random_leaf({2, 3}, 1), random_leaf({3, 4}, 2)}));
  // Transposed (non-contiguous) operands.
  EXPECT_TRUE(GradOk([](const Inputs& x) { return mm(x[0], x[1]); },
                     {random_leaf({3, 2}, 3).t(), random_leaf({4, 3}, 4).t()}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].mm(x[1]); },
                     {random_leaf({3, 2}, 5).t(), random_leaf({3, 4}, 6)}));
}

TEST(LinalgGrad, MmOnlyOneInputRequiresGrad) {
  const Tensor a = random_leaf({2, 3}, 7);
  const Tensor b = random_leaf({3, 2}, 8).detach();
  EXPECT_TRUE(GradOk([&](const Inputs& x) { return mm(x[0], b); }, {a}));
}

TEST(LinalgGrad, Bmm) {
  EXPECT_TRUE(GradOk([](const Inputs& x) { return bmm(x[0], x[1]); },
                     {random_leaf({2, 2, 3}, 9), random_leaf({2, 3, 2}, 10)}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].bmm(x[1]); },
                     {random_leaf({2, 3, 2}, 11).transpose(1, 2), random_leaf({2, 3, 2}, 12)}));
}

TEST(LinalgGrad, MatmulVectorCases) {
  auto f = [](const Inputs& x) { return matmul(x[0], x[1]); };
  EXPECT_TRUE(GradOk(f, {random_leaf({3}, 13), random_leaf({3}, 14)}));     // dot
  EXPECT_TRUE(GradOk(f, {random_leaf({2, 3}, 15), random_leaf({3}, 16)}));  // matrix-vector
  EXPECT_TRUE(GradOk(f, {random_leaf({3}, 17), random_leaf({3, 2}, 18)}));  // vector-matrix
  EXPECT_TRUE(GradOk(f, {random_leaf({3}, 19), random_leaf({2, 3, 2}, 20)}));
  EXPECT_TRUE(GradOk(f, {random_leaf({2, 2, 3}, 21), random_leaf({3}, 22)}));
}

TEST(LinalgGrad, MatmulBatchedBroadcast) {
  auto f = [](const Inputs& x) { return x[0].matmul(x[1]); };
  // (2, 1, 2, 3) @ (3, 3, 2): batch dims broadcast to (2, 3).
  EXPECT_TRUE(GradOk(f, {random_leaf({2, 1, 2, 3}, 23), random_leaf({3, 3, 2}, 24)}));
  // Batched @ matrix folds the batch into rows.
  EXPECT_TRUE(GradOk(f, {random_leaf({2, 2, 3}, 25), random_leaf({2, 3}, 26).t()}));
  // Matrix @ batched.
  EXPECT_TRUE(GradOk(f, {random_leaf({2, 3}, 27), random_leaf({2, 3, 2}, 28)}));
}

// An empty inner dimension (k = 0) sums nothing: zeros of the product's
// shape, as torch.matmul gives, and empty gradients.  Batched @ matrix once
// folded its batch with reshape({-1, 0}), which no size can satisfy.
TEST(LinalgGrad, MatmulWithAnEmptyInnerDimensionGivesZeros) {
  const std::vector<std::tuple<IntList, IntList, IntList>> cases = {
      {{0}, {0}, {}},          {{3, 0}, {0}, {3}},         {{0}, {0, 4}, {4}},
      {{3, 0}, {0, 4}, {3, 4}}, {{2, 3, 0}, {0}, {2, 3}}, {{2, 3, 0}, {0, 4}, {2, 3, 4}},
      {{3, 0}, {2, 0, 4}, {2, 3, 4}}};
  for (const auto& [sa, sb, expected] : cases) {
    const Tensor a = zeros(sa).requires_grad_(), b = zeros(sb).requires_grad_();
    const Tensor out = matmul(a, b);
    ASSERT_EQ(out.sizes(), expected) << shape_str(sa) << " @ " << shape_str(sb);
    EXPECT_EQ(out.abs().sum().item<double>(), 0.0);
    (out * 2).sum().backward();
    EXPECT_EQ(a.grad().sizes(), sa);
    EXPECT_EQ(b.grad().sizes(), sb);
  }
}

TEST(LinalgGrad, Linear) {
  EXPECT_TRUE(GradOk([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                     {random_leaf({4, 3}, 29), random_leaf({2, 3}, 30), random_leaf({2}, 31)}));
  // 3-D input, transposed weight, no bias.
  EXPECT_TRUE(GradOk([](const Inputs& x) { return linear(x[0], x[1]); },
                     {random_leaf({2, 2, 3}, 32), random_leaf({3, 2}, 33).t()}));
  // 1-D input.
  EXPECT_TRUE(GradOk([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                     {random_leaf({3}, 34), random_leaf({2, 3}, 35), random_leaf({2}, 36)}));
}

TEST(LinalgGrad, LinearFloat32GradientsMatchFloat64) {
  const Tensor x = random_leaf({5, 4}, 37), w = random_leaf({3, 4}, 38), b = random_leaf({3}, 39);
  linear(x, w, b).sum().backward();
  const Tensor xf = x.detach().to(kFloat32).requires_grad_();
  const Tensor wf = w.detach().to(kFloat32).requires_grad_();
  const Tensor bf = b.detach().to(kFloat32).requires_grad_();
  linear(xf, wf, bf).sum().backward();
  EXPECT_TRUE(testing::AllClose(xf.grad(), x.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(testing::AllClose(wf.grad(), w.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(testing::AllClose(bf.grad(), b.grad(), 1e-5, 1e-5));
  // d(sum)/db = number of rows.
  EXPECT_TRUE(testing::AllClose(b.grad(), full({3}, 5.0, kFloat64)));
}

}  // namespace
}  // namespace loom
