// Optimizer trajectories against torch.optim (PyTorch 1.13, float32): five
// steps on loss = sum(0.5 * c * p^2 + d * p) from p = [0.5, -1, 2].  The
// expected values were printed by /usr/bin/python3 with torch 1.13.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

template <typename MakeOptimizer>
std::vector<float> run(MakeOptimizer make, int steps = 5) {
  Tensor c = tensor<float>({1.0f, 2.0f, 0.5f});
  Tensor d = tensor<float>({0.3f, -0.2f, 0.1f});
  Tensor p = tensor<float>({0.5f, -1.0f, 2.0f}).requires_grad_();
  auto opt = make(std::vector<Tensor>{p});
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor loss = (0.5f * c * p * p + d * p).sum();
    loss.backward();
    opt.step();
  }
  return p.to_vector<float>();
}

void expect_trajectory(const std::vector<float>& got, const std::vector<float>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], 2e-6 * std::max(1.0f, std::abs(expected[i]))) << "element " << i;
}

TEST(SGD, PlainMatchesPyTorch) {
  expect_trajectory(run([](auto ps) { return optim::SGD(ps, optim::SGDOptions(0.1)); }),
                    {0.172391996f, -0.260447979f, 1.50231802f});
}

TEST(SGD, MomentumDampeningWeightDecayMatchesPyTorch) {
  expect_trajectory(run([](auto ps) {
                      return optim::SGD(ps, optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01));
                    }),
                    {-0.284604609f, 0.690416515f, 0.775690436f});
}

TEST(SGD, NesterovMatchesPyTorch) {
  expect_trajectory(run([](auto ps) {
                      return optim::SGD(ps, optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
                    }),
                    {-0.385333091f, 0.557291389f, 0.474154055f});
}

TEST(Adam, MatchesPyTorch) {
  expect_trajectory(run([](auto ps) { return optim::Adam(ps, optim::AdamOptions(0.1).weight_decay(0.01)); }),
                    {0.0115779936f, -0.506868482f, 1.50261974f});
}

TEST(Adam, AmsgradMatchesPyTorch) {
  expect_trajectory(run([](auto ps) {
                      return optim::Adam(ps, optim::AdamOptions(0.1).betas(0.8, 0.9).amsgrad(true));
                    }),
                    {0.0125223994f, -0.507455766f, 1.50284863f});
}

TEST(AdamW, MatchesPyTorch) {
  expect_trajectory(run([](auto ps) { return optim::AdamW(ps, optim::AdamOptions(0.1).weight_decay(0.1)); }),
                    {-0.00240284204f, -0.468665272f, 1.41512334f});
}

TEST(Optimizer, ParametersWithoutGradientAreSkipped) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  Tensor b = tensor<float>({3, 4}).requires_grad_();
  optim::SGD opt({a, b}, optim::SGDOptions(0.5).momentum(0.9));
  (a * a).sum().backward();
  opt.step();
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_TRUE(opt.has_state(a));
  EXPECT_FALSE(opt.has_state(b));
}

TEST(Optimizer, ZeroGradSetsToNoneOrZero) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  optim::SGD opt({a}, optim::SGDOptions(0.1));
  (a * 3.0f).sum().backward();
  opt.zero_grad(false);
  EXPECT_TRUE(AllClose(a.grad(), zeros({2})));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Optimizer, ParamGroupsHaveTheirOwnLearningRate) {
  Tensor a = tensor<float>({1}).requires_grad_();
  Tensor b = tensor<float>({1}).requires_grad_();
  optim::SGD opt({optim::ParamGroup({a}), optim::ParamGroup({b}, {{"lr", 1.0}})},
                 optim::SGDOptions(0.1));
  (a + b).sum().backward();
  opt.step();
  EXPECT_FLOAT_EQ(a.item<float>(), 0.9f);
  EXPECT_FLOAT_EQ(b.item<float>(), 0.0f);
}

TEST(Optimizer, StateDictResumesExactly) {
  auto make = [](std::vector<Tensor> ps) { return optim::Adam(ps, optim::AdamOptions(0.05)); };
  Tensor c = tensor<float>({1.0f, 2.0f, 0.5f});
  auto step = [&](optim::Optimizer& opt, Tensor& p) {
    opt.zero_grad();
    (0.5f * c * p * p).sum().backward();
    opt.step();
  };
  // Uninterrupted: 6 steps.
  Tensor p1 = tensor<float>({0.5f, -1.0f, 2.0f}).requires_grad_();
  auto opt1 = make({p1});
  for (int i = 0; i < 6; ++i) step(opt1, p1);
  // 3 steps, save, restore into a fresh optimizer, 3 more.
  Tensor p2 = tensor<float>({0.5f, -1.0f, 2.0f}).requires_grad_();
  auto opt2 = make({p2});
  for (int i = 0; i < 3; ++i) step(opt2, p2);
  const auto saved = opt2.state_dict();
  Tensor p3 = p2.detach().clone().requires_grad_();
  auto opt3 = make({p3});
  opt3.load_state_dict(saved);
  for (int i = 0; i < 3; ++i) step(opt3, p3);
  EXPECT_EQ(p3.to_vector<float>(), p1.to_vector<float>());
}

TEST(Optimizer, LoadStateDictRejectsMismatchedLayout) {
  Tensor a = zeros({2}).requires_grad_();
  Tensor b = zeros({3}).requires_grad_();
  optim::SGD opt({a, b}, optim::SGDOptions(0.1).momentum(0.9));
  (a.sum() + b.sum()).backward();
  opt.step();
  Tensor c = zeros({2}).requires_grad_();
  optim::SGD other({c}, optim::SGDOptions(0.1).momentum(0.9));
  EXPECT_LOOM_ERROR(other.load_state_dict(opt.state_dict()), "group 0 has 1 parameters",
                    "saved state has 2");
}

TEST(Optimizer, BadHyperparametersThrow) {
  Tensor a = zeros({2}).requires_grad_();
  EXPECT_LOOM_ERROR(optim::SGD({a}, optim::SGDOptions(-1)), "invalid learning rate");
  EXPECT_LOOM_ERROR(optim::SGD({a}, optim::SGDOptions(0.1).nesterov(true)), "Nesterov");
  EXPECT_LOOM_ERROR(optim::Adam({a}, optim::AdamOptions(0.1).betas(1.0, 0.9)), "beta parameter at index 0");
  EXPECT_LOOM_ERROR(optim::SGD({a, a}, optim::SGDOptions(0.1)), "more than one parameter group");
}

}  // namespace
}  // namespace loom
