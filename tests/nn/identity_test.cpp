// nn::Identity: returns its input itself (any shape, dtype or device), passes
// gradients through unchanged, holds no state, and stands in for a layer in
// a container (as torchvision replaces a model's fc with Identity).
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

TEST(IdentityModule, ReturnsItsInput) {
  nn::Identity id;
  for (const Tensor& x : {randn({2, 3}), zeros({}, kFloat64), empty({0, 4}),
                          tensor<int64_t>({1, 2, 3}), randn({4, 5}).t(),
                          randn({3}).to(Device("cpu:1"))}) {
    const Tensor y = id(x);
    EXPECT_TRUE(y.is_same(x)) << x.describe();
  }
  EXPECT_TRUE(id->parameters().empty());
  EXPECT_TRUE(id->state_dict().empty());
  EXPECT_EQ(id->type_name(), "Identity");
}

TEST(IdentityModule, GradientPassesThrough) {
  nn::Identity id;
  Tensor x = randn({3, 4}, kFloat64).requires_grad_();
  const Tensor g = randn({3, 4}, kFloat64);
  (id(x) * 2.0).backward(g);
  EXPECT_TRUE(AllClose(x.grad(), g * 2.0, 0, 0));
}

TEST(IdentityModule, StandsInForALayer) {
  manual_seed(1);
  nn::Sequential with(nn::Linear(4, 3), nn::Identity(), nn::ReLU());
  nn::Sequential without(nn::Linear(4, 3), nn::ReLU());
  without->load_state_dict(with->state_dict());
  const Tensor x = randn({5, 4});
  EXPECT_TRUE(AllClose(with(x), without(x), 0, 0));
  // No parameters of its own, so the container's names skip it.
  EXPECT_EQ(with->named_parameters().keys(), (std::vector<std::string>{"0.weight", "0.bias"}));
  with->eval();
  EXPECT_FALSE(with[1]->is_training());
  auto copy = with->clone();
  EXPECT_TRUE(AllClose(copy->forward(x), with(x), 0, 0));
}

}  // namespace
}  // namespace loom
