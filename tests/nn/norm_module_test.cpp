// nn::LayerNorm and nn::GroupNorm: parameters named and initialised as in
// PyTorch (state_dict keys "weight", "bias"), option defaults, affine off,
// forward equal to the functional form, gradients reaching the parameters,
// clone, printing, and the errors of construction and of a wrong input.
#include <sstream>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

std::vector<std::string> state_keys(const nn::Module& m) { return m.state_dict().keys(); }

TEST(LayerNormModule, DefaultsAndParameterNames) {
  nn::LayerNorm ln(nn::LayerNormOptions({3, 4}));
  EXPECT_EQ(ln->options.eps_, 1e-5);
  EXPECT_TRUE(ln->options.elementwise_affine_);
  EXPECT_EQ(state_keys(*ln), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(ln->weight.sizes(), (IntList{3, 4}));
  EXPECT_TRUE(AllClose(ln->weight, ones({3, 4})));
  EXPECT_TRUE(AllClose(ln->bias, zeros({3, 4})));
  EXPECT_TRUE(ln->weight.requires_grad());
  EXPECT_EQ(ln->parameters().size(), 2u);
}

TEST(LayerNormModule, ForwardIsTheFunctionalForm) {
  manual_seed(3);
  nn::LayerNorm ln(nn::LayerNormOptions({5}).eps(1e-3));
  ln->weight.detach().uniform_(-1, 1);
  ln->bias.detach().uniform_(-1, 1);
  const Tensor x = randn({2, 3, 5});
  EXPECT_TRUE(AllClose(ln(x), layer_norm(x, {5}, ln->weight, ln->bias, 1e-3), 0, 0));
  // Gradients reach both parameters.
  (ln(x) * randn({2, 3, 5})).sum().backward();
  ASSERT_TRUE(ln->weight.grad().defined());
  ASSERT_TRUE(ln->bias.grad().defined());
  EXPECT_EQ(ln->weight.grad().sizes(), (IntList{5}));
}

TEST(LayerNormModule, WithoutAffineHasNoParameters) {
  nn::LayerNorm ln(nn::LayerNormOptions({4}).elementwise_affine(false));
  EXPECT_TRUE(ln->parameters().empty());
  EXPECT_TRUE(state_keys(*ln).empty());
  EXPECT_FALSE(ln->weight.defined());
  const Tensor x = randn({3, 4});
  EXPECT_TRUE(AllClose(ln(x), layer_norm(x, {4}), 0, 0));
}

TEST(LayerNormModule, CloneCopiesValuesNotStorage) {
  nn::LayerNorm ln(nn::LayerNormOptions({4}).eps(1e-2));
  ln->weight.detach().fill_(2);
  auto copy = std::dynamic_pointer_cast<nn::LayerNormImpl>(ln->clone());
  ASSERT_TRUE(copy != nullptr);
  EXPECT_EQ(copy->options.eps_, 1e-2);
  EXPECT_TRUE(AllClose(copy->weight, full({4}, 2.0)));
  copy->weight.detach().fill_(3);
  EXPECT_TRUE(AllClose(ln->weight, full({4}, 2.0)));
  ln->weight.detach().fill_(5);
  ln->reset_parameters();
  EXPECT_TRUE(AllClose(ln->weight, ones({4})));
}

TEST(LayerNormModule, PrintsAndRejectsBadShapes) {
  std::ostringstream out;
  out << *nn::LayerNorm(nn::LayerNormOptions({3, 4}));
  EXPECT_EQ(out.str(), "LayerNorm([3, 4], eps=1e-05, elementwise_affine=true)");
  nn::LayerNorm ln(nn::LayerNormOptions({3, 4}));
  EXPECT_LOOM_ERROR(ln(randn({2, 4, 3})), "LayerNorm([3, 4])", "[*, 3, 4]", "[2, 4, 3]");
  EXPECT_LOOM_ERROR(ln(randn({4})), "LayerNorm([3, 4])", "got [4]");
  EXPECT_LOOM_ERROR(nn::LayerNorm(nn::LayerNormOptions(std::vector<int64_t>{})),
                    "normalized_shape");
  EXPECT_LOOM_ERROR(nn::LayerNorm(nn::LayerNormOptions({3, 0})), "positive sizes", "[3, 0]");
}

TEST(GroupNormModule, DefaultsAndParameterNames) {
  nn::GroupNorm gn(2, 6);
  EXPECT_EQ(gn->options.eps_, 1e-5);
  EXPECT_TRUE(gn->options.affine_);
  EXPECT_EQ(state_keys(*gn), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(gn->weight.sizes(), (IntList{6}));
  EXPECT_TRUE(AllClose(gn->weight, ones({6})));
  EXPECT_TRUE(AllClose(gn->bias, zeros({6})));
}

TEST(GroupNormModule, ForwardIsTheFunctionalForm) {
  manual_seed(4);
  nn::GroupNorm gn(nn::GroupNormOptions(3, 6).eps(1e-4));
  gn->weight.detach().uniform_(-1, 1);
  gn->bias.detach().uniform_(-1, 1);
  const Tensor x = randn({2, 6, 3, 3});
  EXPECT_TRUE(AllClose(gn(x), group_norm(x, 3, gn->weight, gn->bias, 1e-4), 0, 0));
  (gn(x) * randn({2, 6, 3, 3})).sum().backward();
  ASSERT_TRUE(gn->weight.grad().defined());
  ASSERT_TRUE(gn->bias.grad().defined());
  // (N, C) inputs too.
  EXPECT_EQ(gn(randn({4, 6})).sizes(), (IntList{4, 6}));
}

TEST(GroupNormModule, WithoutAffineHasNoParameters) {
  nn::GroupNorm gn(nn::GroupNormOptions(1, 4).affine(false));
  EXPECT_TRUE(gn->parameters().empty());
  EXPECT_TRUE(state_keys(*gn).empty());
  const Tensor x = randn({2, 4, 5});
  EXPECT_TRUE(AllClose(gn(x), group_norm(x, 1), 0, 0));
}

TEST(GroupNormModule, InSequentialStateDictAndClone) {
  nn::Sequential seq(nn::Linear(4, 6), nn::GroupNorm(3, 6));
  EXPECT_EQ(state_keys(*seq),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  auto copy = seq->clone();
  EXPECT_EQ(state_keys(*copy), state_keys(*seq));
  const Tensor x = randn({5, 4});
  EXPECT_TRUE(AllClose(copy->forward(x), seq->forward(x), 0, 0));
}

TEST(GroupNormModule, PrintsAndRejectsBadArguments) {
  std::ostringstream out;
  out << *nn::GroupNorm(2, 4);
  EXPECT_EQ(out.str(), "GroupNorm(2, 4, eps=1e-05, affine=true)");
  EXPECT_LOOM_ERROR(nn::GroupNorm(3, 4), "num_channels must be divisible by num_groups",
                    "num_channels=4", "num_groups=3");
  EXPECT_LOOM_ERROR(nn::GroupNorm(0, 4), "must be positive");
  nn::GroupNorm gn(2, 4);
  EXPECT_LOOM_ERROR(gn(randn({2, 6, 3})), "GroupNorm(2, 4)", "C = 4", "[2, 6, 3]");
  EXPECT_LOOM_ERROR(gn(randn({4})), "GroupNorm(2, 4)", "[4]");
}

}  // namespace
}  // namespace loom
