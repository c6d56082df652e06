#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;

TEST(Engine, MulAddBackwardAccumulatesIntoLeaves) {
  Tensor a = tensor<float>({1, 2, 3}).requires_grad_();
  Tensor b = tensor<float>({4, 5, 6}).requires_grad_();
  Tensor y = (a * b + a).sum();
  y.backward();
  EXPECT_TRUE(AllClose(a.grad(), tensor<float>({5, 6, 7})));
  EXPECT_TRUE(AllClose(b.grad(), tensor<float>({1, 2, 3})));
  // A second pass accumulates.
  (a * 2.0f).sum().backward();
  EXPECT_TRUE(AllClose(a.grad(), tensor<float>({7, 8, 9})));
}

// .grad takes the leaf's layout (PyTorch's gradient layout contract): a
// channels-last leaf gets a channels-last gradient, whatever layout the
// gradient arrived in; a contiguous leaf a contiguous one.  The values are
// the same either way.
TEST(Engine, LeafGradientsTakeTheLeafsLayout) {
  const Tensor base = random_leaf({2, 3, 4, 5}, 3).detach();
  Tensor last = base.contiguous(MemoryFormat::kChannelsLast).requires_grad_();
  Tensor plain = base.clone().requires_grad_();
  const Tensor w = random_leaf({2, 3, 4, 5}, 4).detach();  // contiguous gradient of (x * w).sum()
  (last * w).sum().backward();
  (plain * w).sum().backward();
  EXPECT_TRUE(last.grad().is_contiguous(MemoryFormat::kChannelsLast));
  EXPECT_TRUE(plain.grad().is_contiguous());
  EXPECT_TRUE(AllClose(last.grad(), w, 0, 0));
  EXPECT_TRUE(AllClose(plain.grad(), w, 0, 0));
  // Accumulating keeps the layout.
  (last * w).sum().backward();
  EXPECT_TRUE(last.grad().is_contiguous(MemoryFormat::kChannelsLast));
  EXPECT_TRUE(AllClose(last.grad(), w * 2.0, 0, 0));
}

TEST(Engine, GradcheckBroadcastMulDiv) {
  Tensor a = random_leaf({2, 3}, 1);
  Tensor b = random_leaf({3}, 2);
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& x) { return x[0] * x[1] + x[0] / (x[1] + 3.0); },
                     {a, b}));
}

TEST(Engine, BackwardTwiceThroughFreedGraphThrows) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  Tensor y = (a * a).sum();
  y.backward();
  EXPECT_LOOM_ERROR(y.backward(), "backward through the graph a second time", "MulBackward");
}

TEST(Engine, RetainGraphAllowsSecondBackward) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  Tensor y = (a * a).sum();
  y.backward(Tensor(), true);
  y.backward();
  EXPECT_TRUE(AllClose(a.grad(), tensor<float>({4, 8})));
}

TEST(Engine, InplaceModificationOfSavedTensorThrows) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  Tensor b = a * 1.0f;
  Tensor y = (b * b).sum();
  b.add_(1.0f);
  EXPECT_LOOM_ERROR(y.backward(), "modified by an inplace operation", "version");
}

TEST(Engine, InplaceOnLeafRequiringGradThrows) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  EXPECT_LOOM_ERROR(a.add_(1.0f), "leaf", "in-place");
  NoGradGuard no_grad;
  a.add_(1.0f);  // fine without grad mode (optimizer updates)
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST(Engine, InplaceOnNonLeafRecordsHistory) {
  Tensor a = random_leaf({3}, 3);
  Tensor b = random_leaf({3}, 4);
  EXPECT_TRUE(GradOk(
      [](const std::vector<Tensor>& x) {
        Tensor y = x[0] * 2.0;
        y.mul_(x[1]);
        y.add_(x[0]);
        return y;
      },
      {a, b}));
}

TEST(Engine, GradDoesNotTouchDotGrad) {
  Tensor a = tensor<double>({1, 2, 3}).requires_grad_();
  Tensor y = (a * a).sum();
  auto g = autograd::grad({y}, {a});
  EXPECT_TRUE(AllClose(g[0], tensor<double>({2, 4, 6})));
  EXPECT_FALSE(a.grad().defined());
}

TEST(Engine, HooksReplaceGradientAndPostAccumulateRuns) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  Tensor b = a * 3.0f;
  b.register_hook([](const Tensor& g) { return g * 10.0f; });
  int post_calls = 0;
  a.register_post_accumulate_grad_hook([&](Tensor& leaf) {
    ++post_calls;
    EXPECT_TRUE(leaf.grad().defined());
  });
  b.sum().backward();
  EXPECT_TRUE(AllClose(a.grad(), tensor<float>({30, 30})));
  EXPECT_EQ(post_calls, 1);
}

TEST(Engine, RetainGradKeepsNonLeafGradient) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  Tensor b = a * 3.0f;
  b.retain_grad();
  (b * b).sum().backward();
  EXPECT_TRUE(AllClose(b.grad(), tensor<float>({6, 12})));
}

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  NoGradGuard guard;
  Tensor b = a * 2.0f;
  EXPECT_FALSE(b.requires_grad());
  EXPECT_EQ(b.grad_fn(), nullptr);
}

TEST(Engine, DetachCutsHistory) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  Tensor b = (a * 2.0f).detach();
  EXPECT_FALSE(b.requires_grad());
  EXPECT_TRUE(b.is_leaf());
}

TEST(Engine, NonScalarBackwardNeedsGradient) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  EXPECT_LOOM_ERROR((a * 2.0f).backward(), "scalar outputs", "[float32 [2] on cpu]");
}

}  // namespace
}  // namespace loom
