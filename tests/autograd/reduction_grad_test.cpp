// Gradchecks for reductions and softmax (finite differences in float64),
// plus exact gradients where they are easy to state by hand.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

TEST(ReductionGrad, MeanOverDimsAndAll) {
  Tensor x = random_leaf({3, 4, 2}, 1);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].mean(); }, {x}));
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].mean({0, 2}); }, {x}));
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].mean({1}, true); }, {x}));
  Tensor t = random_leaf({3, 2}, 2).t();  // non-contiguous (2, 3)
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].mean({1}); }, {t}));
}

TEST(ReductionGrad, MeanGradIsOneOverN) {
  Tensor x = ones({2, 5}, kFloat32).requires_grad_();
  x.mean({1}).sum().backward();
  EXPECT_TRUE(AllClose(x.grad(), full({2, 5}, 0.2f)));
}

TEST(ReductionGrad, VarStdOverDimsAndAll) {
  Tensor x = random_leaf({3, 4}, 3);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].var(); }, {x}));
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].var(false); }, {x}));
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].var({0}, true, true); }, {x}));
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].std(); }, {x}));
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].std({1}, false); }, {x}));
  Tensor y = random_leaf({2, 3, 4}, 4);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].std({0, 2}, true, true); },
                     {y}));
  Tensor t = random_leaf({3, 2}, 5).t();
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].var({1}); }, {t}));
}

TEST(ReductionGrad, MaxMinAlongDim) {
  // Random values have no ties.
  Tensor x = random_leaf({3, 4}, 6);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return std::get<0>(v[0].max(1)); }, {x}));
  EXPECT_TRUE(
      GradOk([](const std::vector<Tensor>& v) { return std::get<0>(v[0].min(0, true)); }, {x}));
  Tensor t = random_leaf({3, 2}, 7).t();
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return std::get<0>(v[0].max(-1)); }, {t}));
  Tensor y = random_leaf({2, 3, 2}, 8);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return std::get<0>(v[0].min(1)); }, {y}));
}

TEST(ReductionGrad, MaxAlongDimRoutesToTheSelectedElement) {
  Tensor x = tensor<float>({1, 5, 2, 7, 3, 0}, {2, 3}).requires_grad_();
  auto [values, indices] = x.max(1);
  (values * tensor<float>({10, 100})).sum().backward();
  EXPECT_TRUE(AllClose(x.grad(), tensor<float>({0, 10, 0, 100, 0, 0}, {2, 3})));
}

TEST(ReductionGrad, MaxMinOfAllElements) {
  Tensor x = random_leaf({3, 4}, 9);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].max(); }, {x}));
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].min(); }, {x}));
  // Ties share the gradient evenly, as in PyTorch.
  Tensor y = tensor<float>({1, 4, 4, 2}).requires_grad_();
  y.max().backward();
  EXPECT_TRUE(AllClose(y.grad(), tensor<float>({0, 0.5f, 0.5f, 0})));
}

TEST(ReductionGrad, Softmax) {
  Tensor x = random_leaf({3, 5}, 10);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].softmax(1); }, {x}));
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].softmax(0); }, {x}));
  Tensor y = random_leaf({2, 3, 4}, 11);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].softmax(1); }, {y}));
  Tensor t = random_leaf({3, 2}, 12).t();
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].softmax(-1); }, {t}));
}

TEST(ReductionGrad, LogSoftmax) {
  Tensor x = random_leaf({4, 3}, 13);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].log_softmax(1); }, {x}));
  Tensor y = random_leaf({2, 3, 4}, 14);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].log_softmax(1); }, {y}));
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].log_softmax(2); }, {y}));
  // Non-contiguous input, on both paths (last dim and inner > 1).
  Tensor t = random_leaf({3, 2}, 15).t();
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].log_softmax(1); }, {t}));
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& v) { return v[0].log_softmax(0); }, {t}));
}

TEST(ReductionGrad, SoftmaxOfSumHasZeroGradient) {
  // Softmax rows sum to one, so d(sum)/dx = 0.
  Tensor x = random_leaf({2, 4}, 16);
  x.softmax(1).sum().backward();
  EXPECT_TRUE(AllClose(x.grad(), zeros({2, 4}, kFloat64), 0, 1e-12));
}

TEST(ReductionGrad, ComposedWithElementwise) {
  Tensor x = random_leaf({3, 4}, 17);
  Tensor w = random_leaf({4}, 18);
  EXPECT_TRUE(GradOk(
      [](const std::vector<Tensor>& v) {
        Tensor z = v[0] * v[1];
        return (z - z.mean({1}, true)) / (z.std({1}, false, true) + 1.0);
      },
      {x, w}));
}

TEST(ReductionGrad, ArgmaxAndIndicesDoNotRequireGrad) {
  Tensor x = random_leaf({3, 4}, 19);
  EXPECT_FALSE(x.argmax(1).requires_grad());
  EXPECT_FALSE(std::get<1>(x.max(1)).requires_grad());
  EXPECT_TRUE(std::get<0>(x.max(1)).requires_grad());
}

}  // namespace
}  // namespace loom
