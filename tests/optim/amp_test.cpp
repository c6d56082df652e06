// amp::initialize's opt levels on the ConvNet (synthetic batches, CPU,
// bfloat16): the dtypes each level gives the model and the optimizer, that
// every level trains (the loss falls), that O2 copies the updated float32
// masters into the 16-bit model, and the argument checks.
#include "tests/TestUtil.h"

namespace loom {
namespace {

struct Losses {
  double first_loss = 0, last_loss = 0;
};

// 30 steps on one fixed batch (memorising it): the loss must fall.
Losses train(nn::models::ConvNet& model, amp::Amp& amp) {
  manual_seed(11);
  const Tensor x = randn({32, 1, 28, 28});
  const Tensor y = randint(0, 10, {32});
  Losses run;
  for (int step = 0; step < 30; ++step) {
    amp.zero_grad();
    Tensor loss;
    {
      auto region = amp.autocast();
      loss = cross_entropy(model->forward(amp.input(x)), y);
    }
    amp.backward(loss);
    amp.step();
    (step == 0 ? run.first_loss : run.last_loss) = loss.item<double>();
  }
  return run;
}

TEST(Amp, EveryOptLevelTrains) {
  for (const std::string level : {"O0", "O1", "O2", "O3"}) {
    manual_seed(10);
    nn::models::ConvNet model;
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    amp::Amp amp = amp::initialize(*model, opt, level);
    const Losses run = train(model, amp);
    EXPECT_LT(run.last_loss, 0.5 * run.first_loss) << level << ": " << run.first_loss << " -> "
                                                    << run.last_loss;
  }
}

TEST(Amp, OptLevelsSetTheDTypes) {
  const auto dtype_of = [](nn::Module& m, const std::string& name) {
    return m.named_parameters().at(name).dtype();
  };
  {
    nn::models::ConvNet model;
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
    amp::Amp amp = amp::initialize(*model, opt, "O1");
    EXPECT_EQ(dtype_of(*model, "layer1.0.weight"), kFloat32);
    EXPECT_NE(amp.autocast(), nullptr);
    EXPECT_TRUE(amp.scaler().is_enabled());
  }
  {
    nn::models::ConvNet model;
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
    amp::Amp amp = amp::initialize(*model, opt, "O2");
    EXPECT_EQ(dtype_of(*model, "layer1.0.weight"), kBFloat16);
    EXPECT_EQ(dtype_of(*model, "layer1.1.weight"), kFloat32);  // batch norm stays float32
    EXPECT_EQ(model->named_buffers().at("layer1.1.running_mean").dtype(), kFloat32);
    for (const auto& group : opt.param_groups())
      for (const Tensor& p : group.params) EXPECT_EQ(p.dtype(), kFloat32) << "masters";
    EXPECT_EQ(amp.autocast(), nullptr);
    EXPECT_EQ(amp.input(ones({1})).dtype(), kBFloat16);
    EXPECT_EQ(amp.input(arange(0, 2)).dtype(), kInt64);
  }
  {
    nn::models::ConvNet model;
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
    amp::Amp amp = amp::initialize(*model, opt, "O3");
    EXPECT_EQ(dtype_of(*model, "layer1.1.weight"), kBFloat16);
    EXPECT_FALSE(amp.scaler().is_enabled());
  }
}

TEST(Amp, O2CopiesTheMastersIntoTheModel) {
  nn::models::ConvNet model;
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
  amp::Amp amp = amp::initialize(*model, opt, "O2");
  train(model, amp);
  const Tensor weight = model->named_parameters().at("fc.weight");
  const Tensor* master = nullptr;
  for (const auto& group : opt.param_groups())
    for (const Tensor& p : group.params)
      if (p.sizes() == weight.sizes()) master = &p;
  ASSERT_NE(master, nullptr);
  EXPECT_EQ(weight.to_vector<float>(), master->to(kBFloat16).to_vector<float>());
}

TEST(Amp, BadArgumentsSaySo) {
  nn::models::ConvNet model;
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
  EXPECT_LOOM_ERROR(amp::initialize(*model, opt, "O4"), "O0, O1, O2 or O3");
  EXPECT_LOOM_ERROR(amp::initialize(*model, opt, "O1", kCPU, kFloat16), "bfloat16");
  EXPECT_LOOM_ERROR(amp::initialize(*model, opt, "O1", kCPU, kFloat32), "float16 or bfloat16");
}

}  // namespace
}  // namespace loom
