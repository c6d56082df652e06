// LR schedulers: learning rates against PyTorch 1.13, and resuming a schedule
// (state_dict / load_state_dict, and the last_epoch constructor argument)
// continues it as an uninterrupted run does.  Expected values were printed by
// /usr/bin/python3 with torch 1.13 (%.17g).
#include <functional>
#include <memory>

#include "tests/PythonRef.h"

namespace loom {
namespace {

using optim::LRScheduler;
using Schedule = std::vector<std::vector<double>>;  // [epoch][group]

std::vector<double> schedule(const std::function<std::unique_ptr<LRScheduler>(optim::Optimizer&)>& make,
                             int epochs = 12) {
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.5));
  auto sched = make(opt);
  std::vector<double> out;
  for (int e = 0; e < epochs; ++e) {
    out.push_back(opt.param_groups()[0].lr());
    opt.step();
    sched->step();
  }
  return out;
}

// Learning rates printed by PyTorch 1.13 (%.17g) for lr 0.5 over 12 epochs.
TEST(LRScheduler, StepLRMatchesPyTorch) {
  const auto got = schedule([](auto& o) { return std::make_unique<optim::StepLR>(o, 3, 0.5); });
  const std::vector<double> want{0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125, 0.0625, 0.0625, 0.0625};
  EXPECT_EQ(got, want);
}

TEST(LRScheduler, MultiStepLRMatchesPyTorch) {
  const auto got = schedule([](auto& o) {
    return std::make_unique<optim::MultiStepLR>(o, std::vector<int64_t>{2, 5, 5, 9}, 0.1);
  });
  const std::vector<double> want{0.5, 0.5, 0.050000000000000003, 0.050000000000000003,
                                 0.050000000000000003, 0.00050000000000000012,
                                 0.00050000000000000012, 0.00050000000000000012,
                                 0.00050000000000000012, 5.0000000000000016e-05,
                                 5.0000000000000016e-05, 5.0000000000000016e-05};
  EXPECT_EQ(got, want);
}

TEST(LRScheduler, CosineAnnealingLRMatchesPyTorch) {
  const auto got = schedule([](auto& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 4, 0.01); });
  const std::vector<double> want{0.5, 0.42824116139070412, 0.255, 0.081758838609295864, 0.01,
                                 0.081758838609295836, 0.255, 0.42824116139070423,
                                 0.50000000000000011, 0.42824116139070428, 0.25500000000000012,
                                 0.081758838609296072};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "epoch " << i;
}

TEST(LRScheduler, LinearLRWarmupMatchesPyTorch) {
  const auto got = schedule([](auto& o) { return std::make_unique<optim::LinearLR>(o, 0.25, 1.0, 4); });
  const std::vector<double> want{0.125, 0.21875, 0.3125, 0.40625, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "epoch " << i;
}

// ---- resuming ---------------------------------------------------------------

// SGD over two parameter groups with their own rates.  A "fresh" one (other
// rates) stands for the objects a resumed run builds before loading.
struct TwoGroups {
  explicit TwoGroups(bool fresh = false)
      : opt({optim::ParamGroup({a}), optim::ParamGroup({b}, {{"lr", fresh ? 0.7 : 0.2}, {"momentum", 0.5}})},
            optim::SGDOptions(fresh ? 0.9 : 0.5).momentum(0.9)) {}
  std::vector<double> lrs() const { return {opt.param_groups()[0].lr(), opt.param_groups()[1].lr()}; }
  Tensor a = zeros({1}).requires_grad_();
  Tensor b = zeros({1}).requires_grad_();
  optim::SGD opt;
};

using MakeScheduler = std::function<std::unique_ptr<LRScheduler>(optim::Optimizer&, int64_t last_epoch)>;

struct SchedulerCase {
  std::string name;
  MakeScheduler make;
};

std::ostream& operator<<(std::ostream& out, const SchedulerCase& c) { return out << c.name; }

std::vector<SchedulerCase> scheduler_cases() {
  return {
      {"StepLR", [](auto& o, int64_t e) { return std::make_unique<optim::StepLR>(o, 3, 0.5, e); }},
      {"MultiStepLR",
       [](auto& o, int64_t e) {
         return std::make_unique<optim::MultiStepLR>(o, std::vector<int64_t>{2, 5, 5, 9}, 0.1, e);
       }},
      {"CosineAnnealingLR",
       [](auto& o, int64_t e) { return std::make_unique<optim::CosineAnnealingLR>(o, 4, 0.01, e); }},
      {"LinearLR",
       [](auto& o, int64_t e) { return std::make_unique<optim::LinearLR>(o, 0.25, 1.0, 4, e); }},
  };
}

constexpr int kEpochs = 12;

// Rates of epochs [from, kEpochs), stepping optimizer then scheduler.
Schedule continue_schedule(TwoGroups& run, LRScheduler& sched, int from) {
  Schedule out;
  for (int e = from; e < kEpochs; ++e) {
    out.push_back(run.lrs());
    run.opt.step();
    sched.step();
  }
  return out;
}

class SchedulerResume : public ::testing::TestWithParam<SchedulerCase> {
 protected:
  // The uninterrupted run, all epochs.
  Schedule straight() {
    TwoGroups run;
    auto sched = GetParam().make(run.opt, -1);
    return continue_schedule(run, *sched, 0);
  }
  // k epochs of a run; its optimizer and scheduler states.
  std::pair<nn::OrderedDict<Tensor>, nn::OrderedDict<Tensor>> first_part(int k) {
    TwoGroups run;
    auto sched = GetParam().make(run.opt, -1);
    for (int e = 0; e < k; ++e) {
      run.opt.step();
      sched->step();
    }
    return {run.opt.state_dict(), sched->state_dict()};
  }
};

TEST_P(SchedulerResume, StateDictContinuesBitForBit) {
  const Schedule want = straight();
  for (int k : {0, 1, 2, 3, 4, 5, 8, 11}) {
    const auto [opt_state, sched_state] = first_part(k);
    const Schedule tail(want.begin() + k, want.end());
    // PyTorch's order: build both, then load the optimizer and the scheduler.
    {
      TwoGroups run(true);
      auto sched = GetParam().make(run.opt, -1);
      run.opt.load_state_dict(opt_state);
      sched->load_state_dict(sched_state);
      EXPECT_EQ(sched->last_epoch(), k);
      EXPECT_EQ(sched->base_lrs(), (std::vector<double>{0.5, 0.2}));
      EXPECT_EQ(sched->get_last_lr(), want[k]);
      EXPECT_EQ(continue_schedule(run, *sched, k), tail) << "resumed after " << k << " epochs";
    }
    // The optimizer loaded before the scheduler is built: construction's step
    // rewrites the rates (LinearLR scales them), load_state_dict restores them.
    {
      TwoGroups run(true);
      run.opt.load_state_dict(opt_state);
      auto sched = GetParam().make(run.opt, -1);
      sched->load_state_dict(sched_state);
      EXPECT_EQ(continue_schedule(run, *sched, k), tail)
          << "optimizer loaded first, resumed after " << k << " epochs";
    }
  }
}

TEST_P(SchedulerResume, StateDictSurvivesASafetensorsFile) {
  const std::string dir = testing::make_temp_dir();
  const Schedule want = straight();
  const int k = 5;
  const auto [opt_state, sched_state] = first_part(k);
  nn::save(opt_state, dir + "/optimizer.safetensors");
  nn::save(sched_state, dir + "/scheduler.safetensors");
  TwoGroups run(true);
  auto sched = GetParam().make(run.opt, -1);
  run.opt.load_state_dict(nn::load(dir + "/optimizer.safetensors"));
  sched->load_state_dict(nn::load(dir + "/scheduler.safetensors"));
  EXPECT_EQ(continue_schedule(run, *sched, k), Schedule(want.begin() + k, want.end()));
}

// A scheduler whose last_epoch() was k, rebuilt with last_epoch = k - 1 over
// the restored optimizer, continues the schedule (closed form at epoch k, so
// equal up to rounding).
TEST_P(SchedulerResume, LastEpochArgumentContinuesTheSchedule) {
  const Schedule want = straight();
  for (int k = 1; k < kEpochs; ++k) {
    const auto opt_state = first_part(k).first;
    TwoGroups run(true);
    run.opt.load_state_dict(opt_state);
    auto sched = GetParam().make(run.opt, k - 1);
    EXPECT_EQ(sched->last_epoch(), k);
    EXPECT_EQ(sched->base_lrs(), (std::vector<double>{0.5, 0.2}));
    const Schedule got = continue_schedule(run, *sched, k);
    for (size_t e = 0; e < got.size(); ++e)
      for (size_t g = 0; g < 2; ++g)
        EXPECT_NEAR(got[e][g], want[k + e][g], 1e-14 * want[k + e][g])
            << "resumed at " << k << ", epoch " << k + e << ", group " << g;
  }
}

TEST_P(SchedulerResume, LastEpochWithoutInitialLrThrowsAndChangesNothing) {
  TwoGroups run;  // never scheduled: no "initial_lr"
  EXPECT_LOOM_ERROR(GetParam().make(run.opt, 3), GetParam().name,
                    "param 'initial_lr' is not specified in param_groups[0] when resuming");
  EXPECT_LOOM_ERROR(GetParam().make(run.opt, -2), "last_epoch must be -1", "got -2");
  EXPECT_EQ(run.lrs(), (std::vector<double>{0.5, 0.2}));
  EXPECT_EQ(run.opt.param_groups()[0].options.count("initial_lr"), 0u);
  // Only the second group restored from a run: still names the one missing.
  run.opt.param_groups()[0].options["initial_lr"] = 0.5;
  EXPECT_LOOM_ERROR(GetParam().make(run.opt, 3), "param_groups[1]");
}

TEST_P(SchedulerResume, LoadStateDictRejectsBadStatesAndChangesNothing) {
  TwoGroups run;
  auto sched = GetParam().make(run.opt, -1);
  run.opt.step();
  sched->step();
  const auto good = sched->state_dict();
  const auto lrs = run.lrs();
  const auto check_unchanged = [&] {
    EXPECT_EQ(sched->last_epoch(), 1);
    EXPECT_EQ(run.lrs(), lrs);
  };
  for (const std::string& key : good.keys()) {
    auto bad = good;
    bad.erase(key);
    EXPECT_LOOM_ERROR(sched->load_state_dict(bad), GetParam().name + ".load_state_dict",
                      "missing key \"" + key + "\"");
    check_unchanged();
  }
  auto three = good;
  three.insert("base_lrs", tensor<double>({0.5, 0.2, 0.1}));
  EXPECT_LOOM_ERROR(sched->load_state_dict(three), "\"base_lrs\" has 3 entries",
                    "the optimizer has 2 parameter groups");
  check_unchanged();
  auto negative = good;
  negative.insert("last_epoch", scalar_tensor(int64_t{-1}, kInt64));
  EXPECT_LOOM_ERROR(sched->load_state_dict(negative), "\"last_epoch\" must be >= 0");
  check_unchanged();
  auto wrong_type = good;
  wrong_type.insert("last_epoch", scalar_tensor(2.5, kFloat64));
  EXPECT_LOOM_ERROR(sched->load_state_dict(wrong_type), "\"last_epoch\" should hold one integer");
  check_unchanged();
  // A one-group schedule does not fit a two-group optimizer.
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD single({p}, optim::SGDOptions(0.5));
  auto other = GetParam().make(single, -1);
  EXPECT_LOOM_ERROR(sched->load_state_dict(other->state_dict()), "has 1 entries",
                    "the optimizer has 2 parameter groups");
  check_unchanged();
}

TEST_P(SchedulerResume, StepAfterAddParamGroupThrows) {
  TwoGroups run;
  auto sched = GetParam().make(run.opt, -1);
  run.opt.add_param_group(optim::ParamGroup({zeros({1}).requires_grad_()}));
  EXPECT_LOOM_ERROR(sched->step(), GetParam().name, "the optimizer has 3 parameter groups",
                    "built for 2");
}

INSTANTIATE_TEST_SUITE_P(Schedulers, SchedulerResume, ::testing::ValuesIn(scheduler_cases()),
                         [](const auto& info) { return info.param.name; });

// PyTorch 1.13 resumes CosineAnnealingLR from last_epoch with its closed form
// too: CosineAnnealingLR(optimizer restored after 5 epochs, 4, 0.01,
// last_epoch=4), rates of epochs 5..11 for groups (0.5, 0.2).
TEST(LRScheduler, CosineLastEpochResumeMatchesPyTorch) {
  TwoGroups source;
  optim::CosineAnnealingLR first(source.opt, 4, 0.01);
  for (int e = 0; e < 5; ++e) first.step();
  TwoGroups run(true);
  run.opt.load_state_dict(source.opt.state_dict());
  optim::CosineAnnealingLR resumed(run.opt, 4, 0.01, 4);
  const Schedule want{{0.081758838609295809, 0.037824855787277969},
                      {0.25499999999999995, 0.10499999999999997},
                      {0.42824116139070412, 0.17217514421272201},
                      {0.5, 0.19999999999999998},
                      {0.42824116139070417, 0.17217514421272201},
                      {0.25500000000000006, 0.10500000000000001},
                      {0.081758838609296058, 0.037824855787278067}};
  EXPECT_EQ(continue_schedule(run, resumed, 5), want);
  EXPECT_EQ(resumed.last_epoch(), 12);
}

// load_state_dict adopts the saved hyperparameters, as PyTorch's does.
TEST(LRScheduler, LoadStateDictAdoptsSavedHyperparameters) {
  TwoGroups a, b;
  optim::StepLR saved(a.opt, 3, 0.1);
  optim::StepLR loaded(b.opt, 2, 0.5);
  loaded.load_state_dict(saved.state_dict());
  for (int e = 0; e < 7; ++e) {
    saved.step();
    loaded.step();
    EXPECT_EQ(loaded.get_last_lr(), saved.get_last_lr()) << "epoch " << e + 1;
  }
  auto state = saved.state_dict();
  state.insert("step_size", scalar_tensor(int64_t{0}, kInt64));
  EXPECT_LOOM_ERROR(loaded.load_state_dict(state), "StepLR.load_state_dict",
                    "step_size must be positive, got 0");
  optim::CosineAnnealingLR cosine(b.opt, 4);
  auto cs = cosine.state_dict();
  cs.insert("T_max", scalar_tensor(int64_t{-3}, kInt64));
  EXPECT_LOOM_ERROR(cosine.load_state_dict(cs), "T_max must be positive, got -3");
  // MultiStepLR's milestones come back sorted, repeats kept.
  optim::MultiStepLR multi(b.opt, {5, 2, 5});
  EXPECT_EQ(multi.state_dict().at("milestones").to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 5}));
}

TEST(LRScheduler, BadArgumentsThrowAndLeaveTheOptimizerAlone) {
  TwoGroups run;
  EXPECT_LOOM_ERROR(optim::StepLR(run.opt, 0), "StepLR: step_size must be positive, got 0");
  EXPECT_LOOM_ERROR(optim::CosineAnnealingLR(run.opt, 0), "T_max must be positive");
  EXPECT_LOOM_ERROR(optim::LinearLR(run.opt, 1.5), "start_factor must be in (0, 1], got 1.5");
  EXPECT_LOOM_ERROR(optim::LinearLR(run.opt, 0.5, 2.0), "end_factor must be in [0, 1], got 2");
  EXPECT_LOOM_ERROR(optim::LinearLR(run.opt, 0.5, 1.0, 0), "total_iters must be positive, got 0");
  EXPECT_EQ(run.lrs(), (std::vector<double>{0.5, 0.2}));
  for (const auto& g : run.opt.param_groups()) EXPECT_EQ(g.options.count("initial_lr"), 0u);
}

}  // namespace
}  // namespace loom
