// Forward values and errors of losses, dropout, one_hot and embedding.
// Expected numbers marked "PyTorch 1.13" were computed with torch 1.13
// (torch.nn.functional, CPU, float64 unless noted).
#include <cmath>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

// (4, 5) logits.
Tensor logits() {
  return tensor<double>({0.2, -1.0, 2.5, 0.3, -0.4, 1.5, 0.1, -0.6, 0.8, 2.0,
                         -0.3, 0.9, 0.4, -1.7, 1.2, 2.2, -0.5, 0.0, 1.1, -2.0},
                        {4, 5});
}
Tensor targets() { return tensor<int64_t>({2, -100, 4, 0}); }
Tensor class_weight() { return tensor<double>({0.5, 1.0, 1.5, 2.0, 0.25}); }

// (2, 3, 2) logits: ((5 i) % 7 - 3) * 0.4.
Tensor logits_3d() {
  std::vector<double> v;
  for (int i = 0; i < 12; ++i) v.push_back(((i * 5) % 7 - 3) * 0.4);
  return tensor<double>(v, {2, 3, 2});
}

TEST(CrossEntropy, PlainMatchesPyTorch) {
  // PyTorch 1.13: F.cross_entropy(x, [2, 1, 4, 0]).
  EXPECT_NEAR(cross_entropy(logits(), tensor<int64_t>({2, 1, 4, 0})).item<double>(),
              1.06061404330339, 1e-12);
  // PyTorch 1.13: reduction='none' / 'mean' / 'sum' with ignore_index=-100.
  EXPECT_TRUE(AllClose(cross_entropy(logits(), targets(), Reduction::kNone),
                       tensor<double>({0.2595006340071499, 0.0, 0.9035298834755282,
                                       0.4225682333392626}),
                       1e-12));
  EXPECT_NEAR(cross_entropy(logits(), targets()).item<double>(), 0.5285329169406469, 1e-12);
  EXPECT_NEAR(cross_entropy(logits(), targets(), Reduction::kSum).item<double>(),
              1.5855987508219407, 1e-12);
}

TEST(CrossEntropy, LabelSmoothingWithIgnoreIndexMatchesPyTorch) {
  // PyTorch 1.13: label_smoothing=0.1, ignore_index=-100.
  EXPECT_TRUE(AllClose(cross_entropy(logits(), targets(), Reduction::kNone, -100, 0.1),
                       tensor<double>({0.4775006340071499, 0.0, 1.0135298834755282,
                                       0.6265682333392626}),
                       1e-12));
  EXPECT_NEAR(cross_entropy(logits(), targets(), Reduction::kMean, -100, 0.1).item<double>(),
              0.7058662502739802, 1e-12);
  EXPECT_NEAR(cross_entropy(logits(), targets(), Reduction::kSum, -100, 0.1).item<double>(),
              2.1175987508219407, 1e-12);
}

TEST(CrossEntropy, LabelSmoothingWithWeightMatchesPyTorch) {
  // PyTorch 1.13: weight=[0.5, 1, 1.5, 2, 0.25], label_smoothing=0.1.
  const Tensor w = class_weight();
  EXPECT_TRUE(AllClose(cross_entropy(logits(), targets(), Reduction::kNone, -100, 0.1, w),
                       tensor<double>({0.573073422480403, 0.0, 0.4591648615469243,
                                       0.4195253695032907}),
                       1e-12));
  EXPECT_NEAR(cross_entropy(logits(), targets(), Reduction::kMean, -100, 0.1, w).item<double>(),
              0.6452282904580526, 1e-12);
  EXPECT_NEAR(cross_entropy(logits(), targets(), Reduction::kSum, -100, 0.1, w).item<double>(),
              1.4517636535306182, 1e-12);
}

TEST(CrossEntropy, SpatialInputMatchesPyTorch) {
  // PyTorch 1.13: (2, 3, 2) logits, target [[0, 2], [1, -100]].
  const Tensor t = tensor<int64_t>({0, 2, 1, -100}, {2, 2});
  EXPECT_TRUE(AllClose(cross_entropy(logits_3d(), t, Reduction::kNone),
                       tensor<double>({2.730678460209874, 1.0271230572779202, 0.4075234748217174,
                                       0.0},
                                      {2, 2}),
                       1e-12));
  // weight=[1, 2, 0.5], label_smoothing=0.2, mean.
  EXPECT_NEAR(cross_entropy(logits_3d(), t, Reduction::kMean, -100, 0.2,
                            tensor<double>({1.0, 2.0, 0.5}))
                  .item<double>(),
              1.2131443949522003, 1e-12);
}

TEST(CrossEntropy, Float32AndUnbatched) {
  const Tensor x = logits().to(kFloat32);
  EXPECT_EQ(cross_entropy(x, targets()).dtype(), kFloat32);
  EXPECT_NEAR(cross_entropy(x, targets()).item<double>(), 0.5285329169406469, 1e-6);
  // A (C) input with a 0-dim target is one sample.
  const Tensor one = cross_entropy(logits().select(0, 2), scalar_tensor(4, kInt64));
  EXPECT_EQ(one.dim(), 0);
  EXPECT_NEAR(one.item<double>(), 0.9035298834755282, 1e-12);
}

TEST(CrossEntropy, Float32AgreesWithFloat64) {
  Generator gen(3);
  const Tensor x = rand({32, 100}, kFloat64, &gen) * 40.0 - 20.0;
  const Tensor t = randint(0, 100, {32}, kInt64, &gen);
  const Tensor w = rand({100}, kFloat64, &gen) + 0.5;
  for (double eps : {0.0, 0.2}) {
    const Tensor ref = cross_entropy(x, t, Reduction::kNone, -100, eps, w);
    const Tensor got =
        cross_entropy(x.to(kFloat32), t, Reduction::kNone, -100, eps, w.to(kFloat32));
    EXPECT_TRUE(AllClose(got, ref.to(kFloat32), 1e-5, 1e-5)) << eps;
    // And the fused gradient.
    Tensor a = x.detach().requires_grad_(), b = x.to(kFloat32).detach().requires_grad_();
    cross_entropy(a, t, Reduction::kMean, -100, eps, w).backward();
    cross_entropy(b, t, Reduction::kMean, -100, eps, w.to(kFloat32)).backward();
    EXPECT_TRUE(AllClose(b.grad(), a.grad().to(kFloat32), 1e-4, 1e-7)) << eps;
  }
}

TEST(CrossEntropy, AllIgnoredMeanIsNan) {
  // PyTorch 1.13 gives nan (0 / 0).
  EXPECT_TRUE(std::isnan(
      cross_entropy(logits(), full({4}, -100, kInt64)).item<double>()));
}

TEST(CrossEntropy, Errors) {
  EXPECT_LOOM_ERROR(cross_entropy(logits(), tensor<int64_t>({2, 12, 0, 0})), "cross_entropy",
                    "Target 12 is out of bounds", "C = 5");
  EXPECT_LOOM_ERROR(cross_entropy(logits(), tensor<int64_t>({2, -1, 0, 0})), "Target -1");
  EXPECT_LOOM_ERROR(cross_entropy(logits(), tensor<int64_t>({1, 2, 3})), "cross_entropy",
                    "expected target of shape [4]", "[4, 5]", "[3]");
  EXPECT_LOOM_ERROR(cross_entropy(logits(), tensor<float>({1, 2, 3, 0})), "cross_entropy",
                    "int64", "float32");
  EXPECT_LOOM_ERROR(cross_entropy(logits(), targets(), Reduction::kMean, -100, 0.0,
                                  tensor<double>({1, 2})),
                    "weight", "[5]");
  EXPECT_LOOM_ERROR(cross_entropy(logits(), targets(), Reduction::kMean, -100, 1.5),
                    "label_smoothing");
  EXPECT_LOOM_ERROR(cross_entropy(tensor<int64_t>({1, 2}, {1, 2}), tensor<int64_t>({0})),
                    "floating-point");
}

TEST(NllLoss, MatchesPyTorch) {
  // PyTorch 1.13: F.nll_loss(x, t, weight=w) for every reduction.
  const Tensor w = class_weight();
  EXPECT_TRUE(AllClose(nll_loss(logits(), targets(), Reduction::kNone, -100, w),
                       tensor<double>({-3.75, 0.0, -0.3, -1.1}), 1e-12));
  EXPECT_NEAR(nll_loss(logits(), targets(), Reduction::kMean, -100, w).item<double>(),
              -2.288888888888889, 1e-12);
  EXPECT_NEAR(nll_loss(logits(), targets(), Reduction::kSum, -100, w).item<double>(), -5.15,
              1e-12);
  EXPECT_NEAR(nll_loss(logits(), tensor<int64_t>({2, 1, 4, 0})).item<double>(), -1.5, 1e-12);
  // A custom ignore_index.
  EXPECT_NEAR(nll_loss(logits(), tensor<int64_t>({2, 1, 4, 0}), Reduction::kSum, 1)
                  .item<double>(),
              -(2.5 + 1.2 + 2.2), 1e-12);
}

TEST(NllLoss, Errors) {
  EXPECT_LOOM_ERROR(nll_loss(logits(), tensor<int64_t>({0, 1, 5, 0})), "nll_loss",
                    "Target 5 is out of bounds", "[0, 5)");
  EXPECT_LOOM_ERROR(nll_loss(logits(), tensor<int32_t>({0, 1, 2, 0})), "nll_loss", "int64",
                    "int32");
  EXPECT_LOOM_ERROR(nll_loss(logits(), tensor<int64_t>({0, 1, 2, 0}, {2, 2})), "nll_loss",
                    "target of shape [4]", "[2, 2]");
  EXPECT_LOOM_ERROR(nll_loss(logits(), targets().to(Device(kCPU, 1))), "nll_loss", "cpu:1");
}

TEST(MseLoss, MatchesPyTorch) {
  // PyTorch 1.13 (float32).
  const Tensor a = tensor<float>({1.0f, 2.0f, 3.0f, -1.0f, 0.5f, 0.0f}, {2, 3});
  const Tensor b = tensor<float>({0.5f, 2.5f, 1.0f, 0.0f, 0.0f, 0.0f}, {2, 3});
  EXPECT_NEAR(mse_loss(a, b).item<double>(), 0.9583333134651184, 1e-6);
  EXPECT_NEAR(mse_loss(a, b, Reduction::kSum).item<double>(), 5.75, 1e-6);
  EXPECT_TRUE(AllClose(mse_loss(a, b, Reduction::kNone),
                       tensor<float>({0.25f, 0.25f, 4.0f, 1.0f, 0.25f, 0.0f}, {2, 3})));
  // Broadcast target.
  EXPECT_NEAR(mse_loss(a, tensor<float>({1.0f, 0.0f, -1.0f})).item<double>(), 4.208333492279053,
              1e-6);
  EXPECT_LOOM_ERROR(mse_loss(a, b.to(kFloat64)), "mse_loss", "float64");
  EXPECT_LOOM_ERROR(mse_loss(a, ones({4})), "mse_loss", "[2, 3]", "[4]");
}

TEST(Dropout, ScalesKeptAndZeroesDropped) {
  Generator gen(7);
  const Tensor x = ones({1000}, kFloat32);
  const Tensor y = dropout(x, 0.25, true, &gen);
  const auto v = y.to_vector<float>();
  int64_t kept = 0;
  for (float e : v) {
    EXPECT_TRUE(e == 0.0f || std::abs(e - 1.0f / 0.75f) < 1e-6) << e;
    kept += e != 0.0f;
  }
  EXPECT_GT(kept, 700);  // about 750 of 1000
  EXPECT_LT(kept, 800);
  // The same seed gives the same mask.
  Generator again(7);
  EXPECT_TRUE(AllClose(dropout(x, 0.25, true, &again), y));
}

TEST(Dropout, EdgeCases) {
  const Tensor x = tensor<float>({1, 2, 3});
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));  // eval: identity
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
  EXPECT_TRUE(AllClose(dropout(x, 1.0, true), zeros({3})));
  EXPECT_LOOM_ERROR(dropout(x, 1.5), "dropout", "between 0 and 1", "1.5");
  EXPECT_LOOM_ERROR(dropout(x, -0.1), "dropout", "-0.1");
}

TEST(OneHot, Values) {
  const Tensor h = one_hot(tensor<int64_t>({0, 2, 1}, {3}));
  EXPECT_EQ(h.sizes(), (IntList{3, 3}));
  EXPECT_EQ(h.dtype(), kInt64);
  EXPECT_EQ(h.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0}));
  const Tensor h2 = one_hot(tensor<int64_t>({1, 0, 3, 2}, {2, 2}), 5);
  EXPECT_EQ(h2.sizes(), (IntList{2, 2, 5}));
  EXPECT_EQ(h2.sum({2}).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(h2.argmax(2).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 3, 2}));
}

TEST(OneHot, Errors) {
  EXPECT_LOOM_ERROR(one_hot(tensor<int64_t>({-1, 0})), "one_hot", "non-negative", "-1");
  EXPECT_LOOM_ERROR(one_hot(tensor<int64_t>({3, 0}), 2), "one_hot", "3", "num_classes", "2");
  EXPECT_LOOM_ERROR(one_hot(tensor<int64_t>({0, -4}), 2), "one_hot", "non-negative", "-4");
  EXPECT_EQ(one_hot(empty({0, 3}, kInt64), 4).sizes(), (IntList{0, 3, 4}));
  EXPECT_EQ(one_hot(empty({2, 0}, kInt64), 0).sizes(), (IntList{2, 0, 0}));
  EXPECT_LOOM_ERROR(one_hot(empty({0}, kInt64)), "one_hot", "empty");
  EXPECT_LOOM_ERROR(one_hot(tensor<float>({1})), "one_hot", "int64");
}

TEST(Embedding, PicksRows) {
  const Tensor w = arange(12, kFloat32).view({4, 3});
  const Tensor out = embedding(w, tensor<int64_t>({3, 0, 3, 1}, {2, 2}));
  EXPECT_EQ(out.sizes(), (IntList{2, 2, 3}));
  EXPECT_TRUE(AllClose(out, tensor<float>({9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5}, {2, 2, 3})));
  // A transposed (non-contiguous) table.
  const Tensor wt = arange(12, kFloat32).view({3, 4}).t();  // (4, 3)
  EXPECT_TRUE(AllClose(embedding(wt, tensor<int64_t>({1}, {1})), tensor<float>({1, 5, 9}, {1, 3})));
  // A 0-dim index picks one row as a (D) tensor.
  EXPECT_TRUE(AllClose(embedding(wt, scalar_tensor(2, kInt64)), tensor<float>({2, 6, 10})));
}

TEST(Embedding, Errors) {
  const Tensor w = zeros({10, 3});
  EXPECT_LOOM_ERROR(embedding(w, tensor<int64_t>({2, 12})), "embedding", "index 12",
                    "V = 10");
  EXPECT_LOOM_ERROR(embedding(w, tensor<int64_t>({-1})), "embedding", "index -1");
  EXPECT_LOOM_ERROR(embedding(w, tensor<float>({1})), "embedding", "int64", "float32");
  EXPECT_LOOM_ERROR(embedding(zeros({10}), tensor<int64_t>({1})), "embedding", "(V, D)");
}

}  // namespace
}  // namespace loom
