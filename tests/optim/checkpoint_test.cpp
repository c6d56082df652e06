// Checkpointing an optimizer with two parameter groups (each with its own
// rate, momentum or betas) and its LR scheduler: train k steps, save model,
// optimizer and scheduler to safetensors files, restore all three into
// objects built with other weights and hyperparameters, train k more.  The
// result is bit-identical to 2k uninterrupted steps.
#include <functional>
#include <memory>

#include "tests/PythonRef.h"

namespace loom {
namespace {

// Two linear layers, one parameter group each.
struct Model {
  explicit Model(uint64_t seed) {
    manual_seed(seed);
    net = nn::Sequential(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 3));
  }
  std::vector<optim::ParamGroup> groups(const optim::Hyperparameters& first,
                                        const optim::Hyperparameters& second) {
    return {optim::ParamGroup(net[0]->parameters(), first),
            optim::ParamGroup(net[2]->parameters(), second)};
  }
  nn::Sequential net;
};

struct Data {
  Data() {
    Generator gen(3);
    x = randn({16, 4}, kFloat32, &gen);
    y = randn({16, 3}, kFloat32, &gen);
  }
  Tensor x, y;
};

void train(Model& m, optim::Optimizer& opt, optim::LRScheduler& sched, const Data& d, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    mse_loss(m.net->forward(d.x), d.y).backward();
    opt.step();
    sched.step();
  }
}

std::vector<double> lrs(const optim::Optimizer& opt) {
  std::vector<double> out;
  for (const auto& g : opt.param_groups()) out.push_back(g.lr());
  return out;
}

// Everything an optimizer holds, for exact comparison.
void expect_same_optimizer_state(const optim::Optimizer& got, const optim::Optimizer& want) {
  const auto a = got.state_dict(), b = want.state_dict();
  ASSERT_EQ(a.keys(), b.keys());
  for (const auto& [key, t] : b) {
    EXPECT_EQ(a.at(key).sizes(), t.sizes()) << key;
    EXPECT_EQ(a.at(key).to_vector<double>(), t.to_vector<double>()) << key;
  }
}

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(Model&, bool resumed)>;

// k steps straight vs k steps, checkpoint to files, fresh objects, k steps.
void check_resume(const MakeOptimizer& make_optimizer, const std::vector<std::string>& state_names) {
  const std::string dir = testing::make_temp_dir();
  const Data data;
  const int k = 4;
  const auto make_scheduler = [](optim::Optimizer& o) {
    return std::make_unique<optim::StepLR>(o, 3, 0.5);
  };

  Model straight(7);
  auto straight_opt = make_optimizer(straight, false);
  auto straight_sched = make_scheduler(*straight_opt);
  train(straight, *straight_opt, *straight_sched, data, 2 * k);

  Model first(7);
  auto first_opt = make_optimizer(first, false);
  auto first_sched = make_scheduler(*first_opt);
  train(first, *first_opt, *first_sched, data, k);
  nn::save(*first.net, dir + "/model.safetensors");
  nn::save(first_opt->state_dict(), dir + "/optimizer.safetensors");
  nn::save(first_sched->state_dict(), dir + "/scheduler.safetensors");

  // The optimizer file holds both groups' hyperparameters and the state of
  // all four parameters.
  const nn::StateDict file = nn::load(dir + "/optimizer.safetensors");
  EXPECT_EQ(file.at("param_groups.0.num_params").item<int64_t>(), 2);
  EXPECT_EQ(file.at("param_groups.1.num_params").item<int64_t>(), 2);
  EXPECT_EQ(file.at("param_groups.0.initial_lr").item<double>(), first_opt->param_groups()[0].options.at("initial_lr"));
  EXPECT_EQ(file.at("param_groups.1.initial_lr").item<double>(), first_opt->param_groups()[1].options.at("initial_lr"));
  for (int i = 0; i < 4; ++i)
    for (const std::string& name : state_names)
      EXPECT_TRUE(file.contains("state." + std::to_string(i) + "." + name)) << i << " " << name;

  // Other weights and other hyperparameters: everything must come from the files.
  Model resumed(99);
  auto resumed_opt = make_optimizer(resumed, true);
  auto resumed_sched = make_scheduler(*resumed_opt);
  nn::load_into(*resumed.net, dir + "/model.safetensors");
  resumed_opt->load_state_dict(nn::load(dir + "/optimizer.safetensors"));
  resumed_sched->load_state_dict(nn::load(dir + "/scheduler.safetensors"));
  EXPECT_EQ(lrs(*resumed_opt), lrs(*first_opt));
  for (size_t g = 0; g < 2; ++g)
    EXPECT_EQ(resumed_opt->param_groups()[g].options, first_opt->param_groups()[g].options) << g;
  train(resumed, *resumed_opt, *resumed_sched, data, k);

  const auto want = straight.net->state_dict();
  for (const auto& [name, t] : resumed.net->state_dict())
    EXPECT_EQ(t.to_vector<float>(), want.at(name).to_vector<float>()) << name;
  EXPECT_EQ(lrs(*resumed_opt), lrs(*straight_opt));
  EXPECT_EQ(resumed_sched->last_epoch(), 2 * k);
  expect_same_optimizer_state(*resumed_opt, *straight_opt);
}

TEST(Checkpoint, SgdWithTwoParamGroupsResumesBitIdentically) {
  check_resume(
      [](Model& m, bool resumed) -> std::unique_ptr<optim::Optimizer> {
        // Group 0: Nesterov momentum 0.9; group 1: lr 0.02, momentum 0.5,
        // weight decay.  The resumed run starts from other values.
        auto groups = resumed ? m.groups({{"lr", 1.0}}, {{"momentum", 0.0}})
                              : m.groups({{"nesterov", 1.0}},
                                         {{"lr", 0.02}, {"momentum", 0.5}, {"weight_decay", 1e-3}});
        return std::make_unique<optim::SGD>(groups,
                                            optim::SGDOptions(resumed ? 0.3 : 0.1).momentum(0.9));
      },
      {"momentum_buffer"});
}

TEST(Checkpoint, AdamWithTwoParamGroupsResumesBitIdentically) {
  check_resume(
      [](Model& m, bool resumed) -> std::unique_ptr<optim::Optimizer> {
        auto groups = resumed ? m.groups({}, {{"lr", 0.5}, {"beta1", 0.1}})
                              : m.groups({}, {{"lr", 0.003}, {"beta1", 0.8}, {"amsgrad", 1.0}});
        return std::make_unique<optim::Adam>(groups,
                                             optim::AdamOptions(resumed ? 0.2 : 0.01).weight_decay(1e-2));
      },
      {"step", "exp_avg", "exp_avg_sq"});
}

// A two-group checkpoint does not load into a one-group optimizer, and the
// optimizer it was refused by is unchanged.
TEST(Checkpoint, GroupLayoutMustMatch) {
  Model m(7);
  optim::SGD two(m.groups({}, {{"lr", 0.02}}), optim::SGDOptions(0.1).momentum(0.9));
  const Data data;
  two.zero_grad();
  mse_loss(m.net->forward(data.x), data.y).backward();
  two.step();
  optim::SGD one(m.net->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  EXPECT_LOOM_ERROR(one.load_state_dict(two.state_dict()), "group 0 has 4 parameters",
                    "saved state has 2");
  for (const Tensor& p : m.net->parameters()) EXPECT_FALSE(one.has_state(p));
  EXPECT_EQ(one.param_groups().size(), 1u);
}

}  // namespace
}  // namespace loom
