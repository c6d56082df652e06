// The activation modules (nn/modules/Activation.h): each forwards to its
// function with its options, prints as PyTorch's does, honours inplace, has
// no parameters, and rejects bad options.
#include <sstream>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

Tensor sample() { return tensor<double>({-4, -3, -1, -0.25, 0, 0.5, 2, 3, 7}); }

template <typename M>
std::string printed(const M& m) {
  std::ostringstream out;
  m->pretty_print(out);
  return out.str();
}

TEST(ActivationModules, ForwardEqualsTheFunction) {
  const Tensor x = sample();
  EXPECT_TRUE(AllClose(nn::LeakyReLU()->forward(x), leaky_relu(x)));
  EXPECT_TRUE(AllClose(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.3))->forward(x),
                       leaky_relu(x, 0.3)));
  EXPECT_TRUE(AllClose(nn::ELU(nn::ELUOptions().alpha(0.7))->forward(x), elu(x, 0.7)));
  EXPECT_TRUE(AllClose(nn::GELU()->forward(x), gelu(x)));
  EXPECT_TRUE(AllClose(nn::GELU(nn::GELUOptions().approximate("tanh"))->forward(x),
                       gelu(x, "tanh")));
  EXPECT_TRUE(AllClose(nn::Softplus(nn::SoftplusOptions().beta(2).threshold(3))->forward(x),
                       softplus(x, 2, 3)));
  EXPECT_TRUE(AllClose(nn::ReLU6()->forward(x), relu6(x)));
  EXPECT_TRUE(AllClose(nn::SiLU()->forward(x), silu(x)));
  EXPECT_TRUE(AllClose(nn::Hardswish()->forward(x), hardswish(x)));
  EXPECT_TRUE(AllClose(nn::Hardsigmoid()->forward(x), hardsigmoid(x)));
  EXPECT_TRUE(AllClose(nn::Mish()->forward(x), mish(x)));
  EXPECT_TRUE(AllClose(nn::Sigmoid()->forward(x), x.sigmoid()));
  EXPECT_TRUE(AllClose(nn::Tanh()->forward(x), x.tanh()));
  // Hand-checked values at the kinks.
  EXPECT_TRUE(AllClose(nn::ReLU6()->forward(tensor<double>({-1, 3, 6, 9})),
                       tensor<double>({0, 3, 6, 6})));
  EXPECT_TRUE(AllClose(nn::Hardsigmoid()->forward(tensor<double>({-3, 0, 3})),
                       tensor<double>({0, 0.5, 1})));
}

TEST(ActivationModules, InplaceWritesTheInput) {
  Tensor x = sample();
  Tensor y = nn::LeakyReLU(nn::LeakyReLUOptions().inplace(true))->forward(x);
  EXPECT_TRUE(y.is_same(x));
  EXPECT_TRUE(AllClose(x, leaky_relu(sample())));
  Tensor z = sample();
  nn::Hardswish(/*inplace=*/true)->forward(z);
  EXPECT_TRUE(AllClose(z, hardswish(sample())));
  Tensor w = sample();
  Tensor out = nn::SiLU()->forward(w);
  EXPECT_FALSE(out.is_same(w));
  EXPECT_TRUE(AllClose(w, sample()));  // not in place by default
}

TEST(ActivationModules, PrintLikePyTorch) {
  EXPECT_EQ(printed(nn::LeakyReLU()), "LeakyReLU(negative_slope=0.01)");
  EXPECT_EQ(printed(nn::ELU()), "ELU(alpha=1)");
  EXPECT_EQ(printed(nn::GELU(nn::GELUOptions().approximate("tanh"))), "GELU(approximate='tanh')");
  EXPECT_EQ(printed(nn::Softplus()), "Softplus(beta=1, threshold=20)");
  EXPECT_EQ(printed(nn::SiLU()), "SiLU()");
  EXPECT_EQ(printed(nn::Mish(true)), "Mish(inplace=true)");
  EXPECT_EQ(printed(nn::Tanh()), "Tanh()");
}

TEST(ActivationModules, NoParametersAndTrainAGradient) {
  nn::Sequential net(nn::Linear(3, 4), nn::GELU(), nn::Linear(4, 2), nn::Mish());
  for (const auto& m : {std::shared_ptr<nn::Module>(nn::GELU().ptr()),
                        std::shared_ptr<nn::Module>(nn::Softplus().ptr())})
    EXPECT_TRUE(m->parameters().empty());
  Generator gen(3);
  Tensor loss = net->forward(randn({5, 3}, kFloat32, &gen)).sum();
  loss.backward();
  for (const Tensor& p : net->parameters()) EXPECT_TRUE(p.grad().defined());
}

TEST(ActivationModules, BadOptionsThrow) {
  EXPECT_LOOM_ERROR(nn::GELU(nn::GELUOptions().approximate("fast")), "GELU", "none", "tanh",
                    "fast");
  EXPECT_LOOM_ERROR(nn::GELU()->forward(tensor<int64_t>({1})), "gelu", "floating-point");
}

}  // namespace
}  // namespace loom
