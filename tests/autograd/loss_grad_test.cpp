// Gradchecks for losses, dropout and embedding (finite differences in
// float64), plus gradients that are easy to state exactly.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;

using Inputs = std::vector<Tensor>;

TEST(NllLossGrad, ReductionsWeightAndIgnoreIndex) {
  Tensor x = random_leaf({4, 5}, 1);
  const Tensor t = tensor<int64_t>({2, -100, 4, 0});
  const Tensor w = tensor<double>({0.5, 1.0, 1.5, 2.0, 0.25});
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    EXPECT_TRUE(GradOk([&](const Inputs& v) { return nll_loss(v[0], t, r); }, {x}));
    EXPECT_TRUE(GradOk([&](const Inputs& v) { return nll_loss(v[0], t, r, -100, w); }, {x}));
  }
  Tensor xt = random_leaf({5, 4}, 2).t();  // non-contiguous (4, 5)
  const Tensor t4 = tensor<int64_t>({2, 1, 4, 0});  // ignore_index 4
  EXPECT_TRUE(GradOk([&](const Inputs& v) { return nll_loss(v[0], t4, Reduction::kMean, 4, w); },
                     {xt}));
}

TEST(NllLossGrad, SpatialInput) {
  Tensor x = random_leaf({2, 3, 2, 2}, 3);
  const Tensor t = tensor<int64_t>({0, 2, 1, 1, -100, 0, 2, 2}, {2, 2, 2});
  const Tensor w = tensor<double>({1.0, 0.3, 2.0});
  EXPECT_TRUE(GradOk([&](const Inputs& v) { return nll_loss(v[0], t, Reduction::kMean, -100, w); },
                     {x}));
  EXPECT_TRUE(GradOk([&](const Inputs& v) { return nll_loss(v[0], t, Reduction::kNone); }, {x}));
}

TEST(NllLossGrad, ExactValues) {
  Tensor x = zeros({2, 3}, kFloat32).requires_grad_();
  nll_loss(x, tensor<int64_t>({1, 2}), Reduction::kMean, -100, tensor<float>({1, 1, 3}))
      .backward();
  // d/dx[n, t_n] = -w[t_n] / (1 + 3).
  EXPECT_TRUE(AllClose(x.grad(), tensor<float>({0, -0.25f, 0, 0, 0, -0.75f}, {2, 3})));
}

TEST(CrossEntropyGrad, PlainAndIgnoreIndex) {
  Tensor x = random_leaf({4, 5}, 4);
  const Tensor t = tensor<int64_t>({2, -100, 4, 0});
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum})
    EXPECT_TRUE(GradOk([&](const Inputs& v) { return cross_entropy(v[0], t, r); }, {x}));
}

TEST(CrossEntropyGrad, WeightAndLabelSmoothing) {
  Tensor x = random_leaf({4, 5}, 5);
  const Tensor t = tensor<int64_t>({2, -100, 4, 0});
  const Tensor w = tensor<double>({0.5, 1.0, 1.5, 2.0, 0.25});
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    EXPECT_TRUE(GradOk([&](const Inputs& v) { return cross_entropy(v[0], t, r, -100, 0.1); }, {x}));
    EXPECT_TRUE(
        GradOk([&](const Inputs& v) { return cross_entropy(v[0], t, r, -100, 0.3, w); }, {x}));
  }
  EXPECT_TRUE(GradOk(
      [&](const Inputs& v) { return cross_entropy(v[0], t, Reduction::kMean, -100, 0.0, w); },
      {x}));
  Tensor xt = random_leaf({5, 4}, 6).t();  // non-contiguous (4, 5)
  EXPECT_TRUE(GradOk(
      [&](const Inputs& v) { return cross_entropy(v[0], t, Reduction::kMean, -100, 0.2, w); },
      {xt}));
}

TEST(CrossEntropyGrad, SpatialInput) {
  Tensor x = random_leaf({2, 3, 4}, 7);
  const Tensor t = tensor<int64_t>({0, 2, 1, -100, 1, 1, 0, 2}, {2, 4});
  const Tensor w = tensor<double>({1.0, 2.0, 0.5});
  EXPECT_TRUE(GradOk([&](const Inputs& v) { return cross_entropy(v[0], t); }, {x}));
  EXPECT_TRUE(GradOk(
      [&](const Inputs& v) { return cross_entropy(v[0], t, Reduction::kMean, -100, 0.2, w); },
      {x}));
  EXPECT_TRUE(GradOk(
      [&](const Inputs& v) { return cross_entropy(v[0], t, Reduction::kNone, -100, 0.2, w); },
      {x}));
}

TEST(CrossEntropyGrad, EqualsSoftmaxMinusOneHotOverN) {
  Tensor x = random_leaf({3, 4}, 8);
  const Tensor t = tensor<int64_t>({1, 3, 0});
  cross_entropy(x, t).backward();
  const Tensor expected = (x.detach().softmax(1) - one_hot(t, 4).to(kFloat64)) / 3.0;
  EXPECT_TRUE(AllClose(x.grad(), expected, 1e-10, 1e-12));
}

TEST(CrossEntropyGrad, MatchesLogSoftmaxThenNll) {
  Tensor a = random_leaf({5, 6}, 9);
  Tensor b = random_leaf({5, 6}, 9);
  const Tensor t = tensor<int64_t>({5, 0, -100, 2, 2});
  const Tensor w = tensor<double>({1, 2, 3, 0.5, 0.25, 1});
  cross_entropy(a, t, Reduction::kMean, -100, 0.0, w).backward();
  nll_loss(b.log_softmax(1), t, Reduction::kMean, -100, w).backward();
  EXPECT_TRUE(AllClose(a.grad(), b.grad(), 1e-10, 1e-12));
}

TEST(MseLossGrad, InputTargetAndBroadcast) {
  Tensor x = random_leaf({3, 4}, 10);
  Tensor y = random_leaf({3, 4}, 11);
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum})
    EXPECT_TRUE(GradOk([&](const Inputs& v) { return mse_loss(v[0], v[1], r); }, {x, y}));
  Tensor b = random_leaf({4}, 12);
  EXPECT_TRUE(GradOk([](const Inputs& v) { return mse_loss(v[0], v[1]); }, {x, b}));
  Tensor xt = random_leaf({4, 3}, 13).t();
  EXPECT_TRUE(GradOk([](const Inputs& v) { return mse_loss(v[0], v[1], Reduction::kSum); },
                     {xt, y}));
}

TEST(EmbeddingGrad, ScatterAddsRows) {
  Tensor w = random_leaf({5, 3}, 14);
  const Tensor idx = tensor<int64_t>({4, 0, 4, 2, 4, 1}, {2, 3});
  EXPECT_TRUE(GradOk([&](const Inputs& v) { return embedding(v[0], idx); }, {w}));
  Tensor wt = random_leaf({3, 5}, 15).t();  // non-contiguous (5, 3)
  EXPECT_TRUE(GradOk([&](const Inputs& v) { return embedding(v[0], idx) * 2.0; }, {wt}));
  // Exact: row r of the gradient counts the occurrences of r.
  Tensor e = zeros({5, 2}, kFloat32).requires_grad_();
  embedding(e, idx).sum().backward();
  EXPECT_TRUE(AllClose(e.grad(), tensor<float>({1, 1, 1, 1, 1, 1, 0, 0, 3, 3}, {5, 2})));
}

TEST(EmbeddingGrad, LargeTableParallelBackward) {
  // Enough work for several threads; every index hits row (i % 97).
  Tensor w = zeros({97, 64}, kFloat32).requires_grad_();
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 4096; ++i) rows.push_back(i % 97);
  embedding(w, tensor<int64_t>(rows)).sum().backward();
  const auto g = w.grad().sum({1}).to_vector<float>();
  for (int64_t r = 0; r < 97; ++r) {
    const int64_t hits = 4096 / 97 + (r < 4096 % 97 ? 1 : 0);
    EXPECT_EQ(g[r], 64.0f * hits) << "row " << r;
  }
}

TEST(DropoutGrad, EqualsMaskOverKeepProbability) {
  Tensor x = random_leaf({50, 4}, 16);
  Generator gen(123);
  const double p = 0.3;
  Tensor y = dropout(x, p, true, &gen);
  y.sum().backward();
  // Kept elements (y != 0, since x != 0) get 1 / (1 - p); dropped ones 0.
  const Tensor kept = y.detach().ne(0.0).to(kFloat64);
  EXPECT_TRUE(AllClose(x.grad(), kept / (1 - p), 1e-12));
  EXPECT_TRUE(AllClose(y.detach(), x.detach() * kept / (1 - p), 1e-12));
  // Finite differences with the same mask each call (same seed).
  EXPECT_TRUE(GradOk(
      [p](const Inputs& v) {
        Generator g(99);
        return dropout(v[0], p, true, &g);
      },
      {x}));
}

}  // namespace
}  // namespace loom
