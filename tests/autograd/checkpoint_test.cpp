// autograd::checkpoint: the forward keeps no activations, the backward
// recomputes them, and every gradient (input and parameters), dropout mask
// and BatchNorm running statistic equals the un-checkpointed run's.
#include "autograd/Checkpoint.h"

#include <atomic>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using autograd::checkpoint;

// A two-layer MLP as a function of its input, for comparing both paths.
struct Mlp {
  nn::Linear fc1{nn::Linear(4, 8)};
  nn::Linear fc2{nn::Linear(8, 3)};
  Tensor operator()(const Tensor& x) const { return fc2(relu(fc1(x))); }
  std::vector<Tensor> parameters() const {
    auto p = fc1->parameters();
    for (const Tensor& t : fc2->parameters()) p.push_back(t);
    return p;
  }
  void zero_grad() {
    fc1->zero_grad();
    fc2->zero_grad();
  }
};

TEST(Checkpoint, GradientsEqualTheUncheckpointedRun) {
  Mlp mlp;
  Generator gen(3);
  Tensor x = randn({5, 4}, {}, &gen).requires_grad_();

  (mlp(x) * mlp(x)).sum().backward();
  std::vector<Tensor> expected{x.grad()};
  for (const Tensor& p : mlp.parameters()) expected.push_back(p.grad());

  x.set_grad(Tensor());
  mlp.zero_grad();
  auto fn = [&mlp](const Tensor& in) { return mlp(in); };
  Tensor y = checkpoint(fn, x, mlp.parameters());
  EXPECT_EQ(y.grad_fn()->name(), "CheckpointBackward");
  EXPECT_TRUE(testing::AllClose(y, mlp(x).detach(), 0, 0));
  (y * checkpoint(fn, x, mlp.parameters())).sum().backward();

  std::vector<Tensor> got{x.grad()};
  for (const Tensor& p : mlp.parameters()) got.push_back(p.grad());
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(testing::AllClose(got[i], expected[i], 1e-6, 1e-7)) << "gradient " << i;
}

TEST(Checkpoint, ForwardRunsWithoutGraphAndBackwardRecomputes) {
  std::atomic<int> calls{0}, calls_recording{0}, calls_recomputing{0};
  Tensor w = ones({3}).requires_grad_();
  auto fn = [&](const Tensor& in) {
    ++calls;
    if (autograd::GradMode::is_enabled()) ++calls_recording;
    if (autograd::is_recomputing()) ++calls_recomputing;
    return (in * w).exp();
  };
  Tensor x = tensor<float>({0.5f, 1.0f, 2.0f}).requires_grad_();
  Tensor y = checkpoint(fn, x, {w});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(calls_recording, 0) << "the forward must not record a graph";
  // Only the checkpoint node stands between y and x.
  ASSERT_EQ(y.grad_fn()->next_edges().size(), 1u);
  EXPECT_EQ(y.grad_fn()->next_edges()[0].node->name(), "AccumulateGrad");
  EXPECT_FALSE(autograd::is_recomputing());

  y.sum().backward();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(calls_recording, 1);
  EXPECT_EQ(calls_recomputing, 1);
  EXPECT_FALSE(autograd::is_recomputing());
  EXPECT_TRUE(testing::AllClose(x.grad(), (x * w).exp().detach(), 1e-6));   // d/dx = w e^{xw}
  EXPECT_TRUE(testing::AllClose(w.grad(), (x * (x * w).exp()).detach(), 1e-6));
}

TEST(Checkpoint, InputWithoutGradStillGivesParameterGradients) {
  Mlp mlp;
  Tensor x = ones({2, 4});  // raw data: no grad
  checkpoint([&mlp](const Tensor& in) { return mlp(in); }, x, mlp.parameters()).sum().backward();
  for (const Tensor& p : mlp.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_GT(p.grad().abs().sum().item(), 0.0);
  }
  EXPECT_FALSE(x.grad().defined());
}

TEST(Checkpoint, NothingToDifferentiateOrNoGradModeIsAPlainCall) {
  Tensor x = ones({3});
  auto fn = [](const Tensor& in) { return in * 2; };
  EXPECT_FALSE(checkpoint(fn, x).requires_grad());
  Tensor leaf = ones({3}).requires_grad_();
  NoGradGuard no_grad;
  Tensor y = checkpoint(fn, leaf);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(testing::AllClose(y, full({3}, 2.0)));
}

TEST(Checkpoint, IdentityKeepsTheInputsHistory) {
  Tensor x = ones({3}).requires_grad_();
  Tensor h = x * 3;
  Tensor y = checkpoint([](const Tensor& in) { return in; }, h);
  EXPECT_EQ(h.grad_fn()->name(), "MulBackward");
  y.sum().backward();
  EXPECT_TRUE(testing::AllClose(x.grad(), full({3}, 3.0)));
}

TEST(Checkpoint, GradcheckThroughTheCheckpoint) {
  Tensor w = testing::random_leaf({3, 3}, 1);
  auto fn = [&w](const Tensor& in) { return in.matmul(w).tanh() * in; };
  EXPECT_TRUE(testing::GradOk(
      [&](const std::vector<Tensor>& in) { return checkpoint(fn, in[0], {w}); },
      {testing::random_leaf({2, 3}, 2)}));
}

TEST(Checkpoint, DropoutDrawsTheSameMaskWhenRecomputing) {
  Generator gen(11);
  Tensor x = rand({4000}, kFloat32, &gen) + 0.5;  // no zeros
  Tensor w = (rand({4000}, kFloat32, &gen) + 0.5).requires_grad_();
  Tensor y = checkpoint([&w](const Tensor& in) { return dropout(in * w, 0.5, true); }, x, {w});
  y.sum().backward();
  // y = x * w * mask * 2, so the gradient of w must be x * mask * 2 with the
  // forward's mask (y != 0), not a fresh one.
  Tensor mask = y.detach().ne(0).to(kFloat32);
  const double kept = mask.mean().item();
  EXPECT_GT(kept, 0.4);
  EXPECT_LT(kept, 0.6);
  EXPECT_TRUE(testing::AllClose(w.grad(), x * mask * 2.0, 1e-6));
}

TEST(Checkpoint, BatchNormRunningStatisticsAreUpdatedOnce) {
  nn::BatchNorm1d bn(4), ref(4);
  Generator gen(5);
  Tensor x = randn({6, 4}, {}, &gen) * 3 + 1;
  ref->forward(x).sum().backward();
  checkpoint([&bn](const Tensor& in) { return bn->forward(in); }, x, bn->parameters())
      .sum()
      .backward();
  EXPECT_TRUE(testing::AllClose(bn->running_mean, ref->running_mean, 1e-6));
  EXPECT_TRUE(testing::AllClose(bn->running_var, ref->running_var, 1e-6));
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
  EXPECT_TRUE(testing::AllClose(bn->weight.grad(), ref->weight.grad(), 1e-5, 1e-6));
}

TEST(Checkpoint, RetainGraphRecomputesEachTime) {
  Tensor w = full({2}, 3.0).requires_grad_();
  Tensor y = checkpoint([&w](const Tensor& in) { return in * w * w; }, ones({2}), {w});
  y.sum().backward(Tensor(), /*retain_graph=*/true);
  y.sum().backward();
  EXPECT_TRUE(testing::AllClose(w.grad(), full({2}, 12.0)));  // 2 * (2 w)
  EXPECT_LOOM_ERROR(y.sum().backward(), "a second time");
}

TEST(Checkpoint, BadArguments) {
  EXPECT_LOOM_ERROR(checkpoint(nullptr, ones({1})), "function is empty");
  EXPECT_LOOM_ERROR(checkpoint([](const Tensor& in) { return in; }, Tensor()), "undefined");
  Tensor w = ones({1}).requires_grad_();
  EXPECT_LOOM_ERROR(checkpoint([](const Tensor&) { return Tensor(); }, ones({1}), {w}),
                    "returned an undefined tensor");
}

}  // namespace
}  // namespace loom
