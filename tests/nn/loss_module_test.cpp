// nn::MSELoss and nn::NLLLoss as modules: reductions, class weights and
// ignore_index reach the op (losses and input gradients equal torch.nn's,
// PyTorch 1.13 run live), the class weight is a buffer that follows the
// module (to, clone, state_dict) and is the module's own copy, and bad
// targets throw.
#include <cmath>

#include "tests/nn/TorchModuleRef.h"

namespace loom {
namespace {

using testing::AllClose;

Tensor random(IntList sizes, uint64_t seed, DType dtype = kFloat32) {
  Generator gen(seed);
  return randn(std::move(sizes), dtype, &gen);
}

// Log-probabilities over dim 1.
Tensor log_probs(IntList sizes, uint64_t seed, DType dtype = kFloat32) {
  return random(std::move(sizes), seed, dtype).log_softmax(1).detach();
}

// Class indices in [0, classes), some replaced by `ignored`.
Tensor classes(IntList sizes, int64_t classes, uint64_t seed, int64_t ignored = -100,
               int every = 0) {
  Generator gen(seed);
  Tensor t = randint(0, classes, std::move(sizes), kInt64, &gen);
  if (every > 0) {
    int64_t* p = t.data_ptr<int64_t>();
    for (int64_t i = 0; i < t.numel(); i += every) p[i] = ignored;
  }
  return t;
}

TEST(MSELossModule, ReductionsMatchTorch) {
  testing::TorchModuleCases cases;
  const Tensor x = random({4, 5}, 1), y = random({4, 5}, 2);
  cases.add_loss("mean", nn::MSELoss(), "nn.MSELoss()", x, y);
  cases.add_loss("sum", nn::MSELoss(Reduction::kSum), "nn.MSELoss(reduction='sum')", x, y);
  cases.add_loss("none", nn::MSELoss(Reduction::kNone), "nn.MSELoss(reduction='none')", x, y);
  cases.add_loss("float64_4d", nn::MSELoss(), "nn.MSELoss()", random({2, 3, 4, 5}, 3, kFloat64),
                 random({2, 3, 4, 5}, 4, kFloat64));
  cases.add_loss("non_contiguous", nn::MSELoss(Reduction::kSum), "nn.MSELoss(reduction='sum')",
                 random({5, 4}, 5).t(), random({4, 5}, 6));
  cases.check(1e-5);
}

TEST(MSELossModule, ValuesAndGradientsByHand) {
  nn::MSELoss loss;
  EXPECT_EQ(loss->reduction, Reduction::kMean);
  Tensor x = tensor<double>({1, 2, 3, 4}).requires_grad_();
  const Tensor y = tensor<double>({0, 2, 5, 1});
  Tensor l = loss(x, y);
  EXPECT_EQ(l.dim(), 0);
  EXPECT_DOUBLE_EQ(l.item<double>(), (1 + 0 + 4 + 9) / 4.0);
  l.backward();
  // d/dx mean((x - y)^2) = 2 (x - y) / n.
  EXPECT_TRUE(AllClose(x.grad(), tensor<double>({0.5, 0, -1, 1.5})));
  EXPECT_TRUE(loss->parameters().empty());
  EXPECT_TRUE(loss->state_dict().empty());
  EXPECT_LOOM_ERROR(loss(zeros({2, 3}), ones({4})), "mse_loss", "[2, 3]", "[4]");
}

TEST(NLLLossModule, ReductionsWeightsAndIgnoreIndexMatchTorch) {
  testing::TorchModuleCases cases;
  const Tensor x = log_probs({6, 5}, 10);
  const Tensor t = classes({6}, 5, 11);
  const Tensor t_ignored = classes({6}, 5, 11, -100, 3);
  const Tensor w = tensor<float>({0.5f, 1.0f, 1.5f, 2.0f, 0.25f});
  cases.add_loss("mean", nn::NLLLoss(), "nn.NLLLoss()", x, t);
  cases.add_loss("sum", nn::NLLLoss(nn::NLLLossOptions().reduction(Reduction::kSum)),
                 "nn.NLLLoss(reduction='sum')", x, t);
  cases.add_loss("none", nn::NLLLoss(nn::NLLLossOptions().reduction(Reduction::kNone)),
                 "nn.NLLLoss(reduction='none')", x, t);
  // The weighted mean divides by the summed weights of the counted targets.
  cases.add_loss("weight_mean", nn::NLLLoss(nn::NLLLossOptions().weight(w)),
                 "nn.NLLLoss(weight=weight)", x, t, w);
  cases.add_loss("weight_sum",
                 nn::NLLLoss(nn::NLLLossOptions().weight(w).reduction(Reduction::kSum)),
                 "nn.NLLLoss(weight=weight, reduction='sum')", x, t, w);
  cases.add_loss("weight_none",
                 nn::NLLLoss(nn::NLLLossOptions().weight(w).reduction(Reduction::kNone)),
                 "nn.NLLLoss(weight=weight, reduction='none')", x, t, w);
  cases.add_loss("ignore_default", nn::NLLLoss(), "nn.NLLLoss()", x, t_ignored);
  cases.add_loss("ignore_default_none",
                 nn::NLLLoss(nn::NLLLossOptions().reduction(Reduction::kNone)),
                 "nn.NLLLoss(reduction='none')", x, t_ignored);
  // ignore_index may be a real class: its targets drop out of the mean.
  const Tensor t_class1 = classes({6}, 5, 12, 1, 2);
  cases.add_loss("ignore_class_weight_mean",
                 nn::NLLLoss(nn::NLLLossOptions().ignore_index(1).weight(w)),
                 "nn.NLLLoss(weight=weight, ignore_index=1)", x, t_class1, w);
  cases.add_loss("ignore_class_sum",
                 nn::NLLLoss(nn::NLLLossOptions().ignore_index(1).reduction(Reduction::kSum)),
                 "nn.NLLLoss(ignore_index=1, reduction='sum')", x, t_class1);
  // (N, C, H, W) with (N, H, W) targets.
  const Tensor w64 = tensor<double>({1.0, 0.3, 2.0});
  cases.add_loss("spatial_float64",
                 nn::NLLLoss(nn::NLLLossOptions().weight(w64)), "nn.NLLLoss(weight=weight)",
                 log_probs({2, 3, 4, 5}, 13, kFloat64), classes({2, 4, 5}, 3, 14, -100, 7), w64);
  cases.add_loss("spatial_none",
                 nn::NLLLoss(nn::NLLLossOptions().reduction(Reduction::kNone)),
                 "nn.NLLLoss(reduction='none')", log_probs({2, 3, 4, 5}, 15),
                 classes({2, 4, 5}, 3, 16));
  cases.add_loss("non_contiguous", nn::NLLLoss(), "nn.NLLLoss()",
                 log_probs({5, 6}, 17).t(), classes({6}, 5, 18));
  cases.check(1e-5);
}

TEST(NLLLossModule, AllTargetsIgnoredMeanIsNaNAsInTorch) {
  nn::NLLLoss loss;
  const Tensor l = loss(log_probs({3, 4}, 19), tensor<int64_t>({-100, -100, -100}));
  EXPECT_TRUE(std::isnan(l.item<float>()));  // 0 / 0, as PyTorch 1.13
  nn::NLLLoss sum(nn::NLLLossOptions().reduction(Reduction::kSum));
  EXPECT_EQ(sum(log_probs({3, 4}, 19), tensor<int64_t>({-100, -100, -100})).item<float>(), 0.0f);
}

TEST(NLLLossModule, WeightIsABufferThatFollowsTheModule) {
  nn::NLLLoss plain;
  EXPECT_TRUE(plain->named_buffers().empty());
  nn::NLLLoss loss(nn::NLLLossOptions().weight(tensor<float>({1.0f, 3.0f})));
  EXPECT_TRUE(loss->parameters().empty());
  ASSERT_TRUE(loss->named_buffers().contains("weight"));
  EXPECT_EQ(loss->state_dict().keys(), (std::vector<std::string>{"weight"}));
  // to(kFloat64) converts the weight the forward pass uses.
  loss->to(kFloat64);
  EXPECT_EQ(loss->named_buffers().at("weight").dtype(), kFloat64);
  const Tensor x = tensor<double>({-1.0, -2.0, -3.0, -4.0}, {2, 2});
  // Weighted mean: (1 * 1 + 3 * 4) / (1 + 3).
  EXPECT_DOUBLE_EQ(loss(x, tensor<int64_t>({0, 1})).item<double>(), 13.0 / 4.0);
  // A loaded state_dict changes the weight used.
  nn::StateDict state;
  state.insert("weight", tensor<double>({2.0, 2.0}));
  loss->load_state_dict(state);
  EXPECT_DOUBLE_EQ(loss(x, tensor<int64_t>({0, 1})).item<double>(), 2.5);
}

TEST(NLLLossModule, CloneOwnsItsWeight) {
  nn::NLLLoss loss(nn::NLLLossOptions().weight(tensor<float>({1.0f, 3.0f})));
  auto copy = std::dynamic_pointer_cast<nn::NLLLossImpl>(loss->clone());
  ASSERT_TRUE(copy);
  const Tensor x = tensor<float>({-1.0f, -2.0f, -3.0f, -4.0f}, {2, 2});
  const Tensor t = tensor<int64_t>({0, 1});
  EXPECT_FLOAT_EQ(copy->forward(x, t).item<float>(), 13.0f / 4.0f);
  // Changing the copy's weight leaves the original alone, and the copy uses it.
  nn::StateDict state;
  state.insert("weight", tensor<float>({2.0f, 2.0f}));
  copy->load_state_dict(state);
  EXPECT_FLOAT_EQ(copy->forward(x, t).item<float>(), 2.5f);
  EXPECT_FLOAT_EQ(loss(x, t).item<float>(), 13.0f / 4.0f);
  EXPECT_EQ(loss->named_buffers().at("weight").to_vector<float>(), (std::vector<float>{1.0f, 3.0f}));
  // The module holds a copy of the weight it was given.
  Tensor w = tensor<float>({1.0f, 3.0f});
  nn::NLLLoss from_w(nn::NLLLossOptions().weight(w));
  w.fill_(5.0f);
  EXPECT_FLOAT_EQ(from_w(x, t).item<float>(), 13.0f / 4.0f);
  // CrossEntropyLoss keeps its weight the same way.
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().weight(tensor<float>({1.0f, 3.0f})));
  auto ce_copy = std::dynamic_pointer_cast<nn::CrossEntropyLossImpl>(ce->clone());
  ASSERT_TRUE(ce_copy);
  const float ce_before = ce(x, t).item<float>();
  ce_copy->load_state_dict(state);
  EXPECT_NE(ce_copy->forward(x, t).item<float>(), ce_before);
  EXPECT_EQ(ce(x, t).item<float>(), ce_before);
  EXPECT_EQ(ce->named_buffers().at("weight").to_vector<float>(), (std::vector<float>{1.0f, 3.0f}));
}

TEST(NLLLossModule, BadTargetsAndWeightsThrow) {
  nn::NLLLoss loss;
  const Tensor x = log_probs({4, 5}, 20);
  EXPECT_LOOM_ERROR(loss(x, tensor<int64_t>({0, 1, 5, 0})), "nll_loss", "5");
  EXPECT_LOOM_ERROR(loss(x, tensor<int64_t>({0, 1, -1, 0})), "nll_loss", "-1");
  EXPECT_LOOM_ERROR(loss(x, tensor<float>({0, 1, 2, 0})), "nll_loss", "int64");
  EXPECT_LOOM_ERROR(loss(x, tensor<int64_t>({0, 1, 2})), "nll_loss", "[3]");
  nn::NLLLoss weighted(nn::NLLLossOptions().weight(ones({3})));
  EXPECT_LOOM_ERROR(weighted(x, tensor<int64_t>({0, 1, 2, 0})), "nll_loss", "weight");
}

}  // namespace
}  // namespace loom
