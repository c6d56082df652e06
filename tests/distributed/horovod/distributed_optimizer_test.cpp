// hvd::DistributedOptimizer on 2 and 3 forked ranks.  After every step each
// rank's parameters equal (<= 1e-5) one process training on the whole batch
// and DistributedDataParallel on the same shards; backward_passes_per_step
// = 2 equals accumulating two micro-batches; join() with uneven data equals
// the zero-padded reduction and returns the last rank; a parameter only
// some ranks use is reduced by name; misuse gives Horovod's errors;
// broadcast_parameters and broadcast_optimizer_state make ranks equal.
#include "distributed/parallel/DistributedDataParallel.h"
#include "tests/distributed/horovod/HvdRanks.h"

namespace loom {
namespace {

using ModulePtr = std::shared_ptr<nn::Module>;
using testing::expect_error;
using testing::max_abs_diff;
using testing::parameter_values;
using testing::run_hvd_ranks;

ModulePtr make_mlp() { return nn::Sequential(nn::Linear(6, 8), nn::ReLU(), nn::Linear(8, 3)).ptr(); }

ModulePtr make_convnet() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 3, 3).padding(1)), nn::ReLU(),
                        nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)), nn::Flatten(), nn::Linear(3 * 2 * 2, 2))
      .ptr();
}

ModulePtr seeded(const std::function<ModulePtr()>& make, uint64_t seed) {
  manual_seed(seed);
  return make();
}

optim::SGDOptions sgd_options() { return optim::SGDOptions(0.1).momentum(0.5); }

struct Batch {
  Tensor x, y;
};

// `steps` batches of 12 examples for a model of the given input shape.
std::vector<Batch> make_batches(const std::function<ModulePtr()>& make, IntList input, int steps, uint64_t seed) {
  Generator gen(seed);
  IntList xs{12};
  xs.insert(xs.end(), input.begin(), input.end());
  std::vector<Batch> out;
  NoGradGuard no_grad;
  const IntList ys = make()->forward(zeros(xs)).sizes();
  for (int s = 0; s < steps; ++s) out.push_back({randn(xs, {}, &gen), randn(ys, {}, &gen)});
  return out;
}

// This rank's rows [rank * n / world, +n / world) of t.
Tensor shard(const Tensor& t, int rank, int world) {
  const int64_t n = t.size(0) / world;
  return t.narrow(0, rank * n, n);
}

void check_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::string& what) {
  const double diff = max_abs_diff(a, b);
  LOOM_CHECK(diff <= 1e-5, what, ": parameters differ by ", diff);
}

// hvd training == one process on the whole batch == DDP, after every step.
void train_and_compare(int rank, int world, const std::function<ModulePtr()>& make, IntList input,
                       hvd::CompressorPtr compression) {
  const int steps = 3;
  const std::vector<Batch> batches = make_batches(make, input, steps, 5);
  ModulePtr reference = seeded(make, 100);
  ModulePtr model = seeded(make, 100 + rank);  // differs until the broadcast
  ModulePtr ddp_model = seeded(make, 100 + rank);
  distributed::DistributedDataParallel ddp(ddp_model);  // broadcasts rank 0's
  optim::SGD ref_opt(reference->parameters(), sgd_options());
  optim::SGD sgd(model->parameters(), sgd_options());
  optim::SGD ddp_opt(ddp->parameters(), sgd_options());
  hvd::DistributedOptimizer optimizer(sgd, model->named_parameters(), compression);
  hvd::broadcast_parameters(model->state_dict(), 0);
  hvd::broadcast_optimizer_state(optimizer, 0);
  check_close(parameter_values(*model), parameter_values(*reference), "after broadcast_parameters");

  for (int s = 0; s < steps; ++s) {
    const Batch& b = batches[s];
    ref_opt.zero_grad();
    mse_loss(reference->forward(b.x), b.y).backward();
    ref_opt.step();

    optimizer.zero_grad();
    mse_loss(model->forward(shard(b.x, rank, world)), shard(b.y, rank, world)).backward();
    optimizer.step();

    ddp_opt.zero_grad();
    mse_loss(ddp->forward(shard(b.x, rank, world)), shard(b.y, rank, world)).backward();
    ddp_opt.step();

    const std::string at = "rank " + std::to_string(rank) + " step " + std::to_string(s);
    check_close(parameter_values(*model), parameter_values(*reference), at + " vs one process");
    check_close(parameter_values(*model), parameter_values(*ddp_model), at + " vs DDP");
  }
}

TEST(HvdDistributedOptimizer, MatchesOneProcessAndDdpEveryStepOn2And3Ranks) {
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    run_hvd_ranks(world, [world](int rank) {
      train_and_compare(rank, world, make_mlp, {6}, hvd::Compression::none);
      train_and_compare(rank, world, make_convnet, {1, 4, 4}, hvd::Compression::none);
    });
  }
}

TEST(HvdDistributedOptimizer, AnyFusionThresholdGivesTheSameResult) {
  for (int64_t threshold : {int64_t(0), int64_t(64), int64_t(1) << 30}) {
    SCOPED_TRACE(threshold);
    hvd::InitOptions options;
    options.fusion_threshold_bytes = threshold;
    run_hvd_ranks(2, [threshold](int rank) {
      LOOM_CHECK(hvd::fusion_threshold() == threshold, "threshold ", hvd::fusion_threshold());
      train_and_compare(rank, 2, make_convnet, {1, 4, 4}, hvd::Compression::none);
    }, options);
  }
}

// float32 gradients travel as float64.
class WideCompressor : public hvd::Compressor {
 public:
  Tensor compress(const Tensor& t) const override { return t.to(kFloat64); }
  Tensor decompress(const Tensor& wire, DType original) const override { return wire.to(original); }
  std::string name() const override { return "wide"; }
};

TEST(HvdDistributedOptimizer, AllReducesStartDuringBackwardAndAStepsGradientsFuse) {
  hvd::InitOptions options;
  options.cycle_time_ms = 300;  // a backward of this model takes far less
  run_hvd_ranks(2, [](int rank) {
    ModulePtr model = seeded(make_mlp, 100);
    optim::SGD sgd(model->parameters(), sgd_options());
    hvd::DistributedOptimizer optimizer(sgd, model->named_parameters());
    LOOM_CHECK(optimizer.parameter_names() == std::vector<std::string>({"allreduce.0.weight", "allreduce.0.bias",
                                                                        "allreduce.2.weight", "allreduce.2.bias"}),
               "parameter names");
    // The first layer's weight gets its gradient last: by then the last
    // layer's gradients have been submitted (backward is still running).
    int64_t submitted_during_backward = -1;
    const int64_t base = hvd::stats().submitted;
    model->parameters()[0].register_post_accumulate_grad_hook(
        [&](Tensor&) { submitted_during_backward = hvd::stats().submitted - base; });
    const std::vector<Batch> batches = make_batches(make_mlp, {6}, 2, 21);
    for (const Batch& b : batches) {
      submitted_during_backward = -1;
      const int64_t submitted = hvd::stats().submitted;
      const hvd::Stats before = hvd::stats();
      optimizer.zero_grad();
      mse_loss(model->forward(shard(b.x, rank, 2)), shard(b.y, rank, 2)).backward();
      LOOM_CHECK(submitted_during_backward - (submitted - base) >= 3, "only ",
                 submitted_during_backward - (submitted - base), " gradients were submitted when the last one "
                 "was produced");
      optimizer.step();
      const hvd::Stats after = hvd::stats();
      LOOM_CHECK(after.fused_operations - before.fused_operations == 1 && after.tensors - before.tensors == 4,
                 "one step: ", after.fused_operations - before.fused_operations, " collectives for ",
                 after.tensors - before.tensors, " gradients, expected 1 for 4");
    }
  }, options);
}

TEST(HvdDistributedOptimizer, GradientsCanTravelCompressed) {
  run_hvd_ranks(2, [](int rank) {
    train_and_compare(rank, 2, make_mlp, {6}, std::make_shared<WideCompressor>());
  });
}

TEST(HvdDistributedOptimizer, TwoBackwardPassesPerStepEqualAccumulatingTwoMicroBatches) {
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    run_hvd_ranks(world, [world](int rank) {
      const std::vector<Batch> batches = make_batches(make_mlp, {6}, 3, 7);
      ModulePtr reference = seeded(make_mlp, 100), model = seeded(make_mlp, 100), ddp_model = seeded(make_mlp, 100);
      distributed::DistributedDataParallel ddp(ddp_model);
      optim::SGD ref_opt(reference->parameters(), sgd_options());
      optim::SGD sgd(model->parameters(), sgd_options());
      optim::SGD ddp_opt(ddp->parameters(), sgd_options());
      hvd::DistributedOptimizer optimizer(sgd, model->named_parameters(), hvd::Compression::none,
                                          /*backward_passes_per_step=*/2);
      LOOM_CHECK(optimizer.backward_passes_per_step() == 2, "backward_passes_per_step");
      for (int s = 0; s < 3; ++s) {
        // Rank r's shard (12 / world rows) in two micro-batches; micro-batch
        // m of the global batch is every rank's m-th half.
        const Tensor x = shard(batches[s].x, rank, world), y = shard(batches[s].y, rank, world);
        const int64_t half = x.size(0) / 2;
        ref_opt.zero_grad();
        for (int m = 0; m < 2; ++m) {
          std::vector<Tensor> xs, ys;
          for (int r = 0; r < world; ++r) {
            xs.push_back(shard(batches[s].x, r, world).narrow(0, m * half, half));
            ys.push_back(shard(batches[s].y, r, world).narrow(0, m * half, half));
          }
          (mse_loss(reference->forward(cat(xs, 0)), cat(ys, 0)) / 2.0).backward();
        }
        ref_opt.step();

        optimizer.zero_grad();
        for (int m = 0; m < 2; ++m)
          (mse_loss(model->forward(x.narrow(0, m * half, half)), y.narrow(0, m * half, half)) / 2.0).backward();
        optimizer.step();

        ddp_opt.zero_grad();
        {
          auto no_sync = ddp->no_sync();
          (mse_loss(ddp->forward(x.narrow(0, 0, half)), y.narrow(0, 0, half)) / 2.0).backward();
        }
        (mse_loss(ddp->forward(x.narrow(0, half, half)), y.narrow(0, half, half)) / 2.0).backward();
        ddp_opt.step();

        const std::string at = "rank " + std::to_string(rank) + " step " + std::to_string(s);
        check_close(parameter_values(*model), parameter_values(*reference), at + " vs one process");
        check_close(parameter_values(*model), parameter_values(*ddp_model), at + " vs DDP no_sync");
      }
    });
  }
}

// Rank r's s-th batch (4 examples) when ranks have different amounts of data.
Batch uneven_batch(int rank, int step) {
  Generator gen(1000 + 10 * rank + step);
  Tensor x = randn({4, 6}, {}, &gen);
  return {x, randn({4, 3}, {}, &gen)};
}

TEST(HvdDistributedOptimizer, JoinWithUnevenDataEqualsTheZeroPaddedReductionAndEnds) {
  struct Case {
    std::vector<int> batches;  // per rank
    int last;                  // the rank with the most data joins last
  };
  for (const Case& c : {Case{{3, 2}, 0}, Case{{2, 4, 3}, 1}}) {
    const int world = static_cast<int>(c.batches.size());
    SCOPED_TRACE(world);
    run_hvd_ranks(world, [c, world](int rank) {
      // The reference: every step averages the gradients of the ranks that
      // still have data with zeros for the others (divided by world).
      const int steps = *std::max_element(c.batches.begin(), c.batches.end());
      ModulePtr reference = seeded(make_mlp, 100);
      optim::SGD ref_opt(reference->parameters(), sgd_options());
      std::vector<std::vector<Tensor>> expected;
      for (int s = 0; s < steps; ++s) {
        ref_opt.zero_grad();
        for (int r = 0; r < world; ++r) {
          if (s >= c.batches[r]) continue;
          const Batch b = uneven_batch(r, s);
          mse_loss(reference->forward(b.x), b.y).backward();
        }
        {
          NoGradGuard no_grad;
          for (Tensor& p : reference->parameters()) p.grad().mul_(1.0 / world);
        }
        ref_opt.step();
        expected.push_back(parameter_values(*reference));
      }

      ModulePtr model = seeded(make_mlp, 100);
      optim::SGD sgd(model->parameters(), sgd_options());
      hvd::DistributedOptimizer optimizer(sgd, model->named_parameters());
      for (int s = 0; s < c.batches[rank]; ++s) {
        const Batch b = uneven_batch(rank, s);
        optimizer.zero_grad();
        mse_loss(model->forward(b.x), b.y).backward();
        optimizer.step();
        check_close(parameter_values(*model), expected[s],
                    "rank " + std::to_string(rank) + " step " + std::to_string(s));
      }
      const int last = hvd::join();
      LOOM_CHECK(last == c.last, "join returned ", last, ", expected ", c.last);
    }, {}, 90);
  }
}

TEST(HvdDistributedOptimizer, AParameterOnlySomeRanksUseIsReducedByName) {
  run_hvd_ranks(2, [](int rank) {
    // Two heads; rank 1 never uses head b, so its gradient reaches step() as
    // none and is reduced there (zeros), after rank 0 reduced it in backward.
    auto make_heads = [](uint64_t seed) {
      manual_seed(seed);
      return std::make_pair(nn::Linear(6, 3), nn::Linear(6, 3));
    };
    auto named = [](const nn::Linear& a, const nn::Linear& b) {
      nn::OrderedDict<Tensor> out;
      for (const auto& [n, t] : a->named_parameters()) out.insert("a." + n, t);
      for (const auto& [n, t] : b->named_parameters()) out.insert("b." + n, t);
      return out;
    };
    auto loss = [](const nn::Linear& a, const nn::Linear& b, int r, const Batch& batch) {
      Tensor out = a->forward(batch.x);
      if (r == 0) out = out + b->forward(batch.x);
      return mse_loss(out, batch.y);
    };
    auto [ra, rb] = make_heads(3);
    auto [a, b] = make_heads(3);
    std::vector<Tensor> ref_params = named(ra, rb).values();
    optim::SGD ref_opt(ref_params, optim::SGDOptions(0.1));
    optim::SGD sgd(named(a, b).values(), optim::SGDOptions(0.1));
    hvd::DistributedOptimizer optimizer(sgd, named(a, b));
    for (int s = 0; s < 2; ++s) {
      ref_opt.zero_grad();
      for (int r = 0; r < 2; ++r) loss(ra, rb, r, uneven_batch(r, s)).backward();
      {
        NoGradGuard no_grad;
        for (Tensor& p : ref_params) p.grad().mul_(0.5);
      }
      ref_opt.step();
      optimizer.zero_grad();
      loss(a, b, rank, uneven_batch(rank, s)).backward();
      optimizer.step();
      std::vector<Tensor> mine, ref;
      for (const Tensor& p : named(a, b).values()) mine.push_back(p.detach().clone());
      for (const Tensor& p : ref_params) ref.push_back(p.detach().clone());
      check_close(mine, ref, "rank " + std::to_string(rank) + " step " + std::to_string(s));
    }
  });
}

TEST(HvdDistributedOptimizer, MisuseGivesHorovodsErrors) {
  run_hvd_ranks(2, [](int rank) {
    const std::vector<Batch> batches = make_batches(make_mlp, {6}, 1, 9);
    ModulePtr model = seeded(make_mlp, 100);
    auto loss = [&] { return mse_loss(model->forward(shard(batches[0].x, rank, 2)), shard(batches[0].y, rank, 2)); };
    optim::SGD sgd(model->parameters(), sgd_options());
    {
      hvd::DistributedOptimizer optimizer(sgd, model->named_parameters());
      loss().backward();
      expect_error([&] { optimizer.zero_grad(); },
                   {"hvd::DistributedOptimizer::zero_grad", "called after backward() produced the gradients of 4 "
                    "parameter(s)", "before step() or synchronize()", "race", "Call step() (or synchronize()) "
                    "first, then zero_grad()"},
                   "zero_grad while reductions are pending");
      expect_error([&] { loss().backward(); },
                   {"hvd::DistributedOptimizer: the gradient of parameter \"", "was computed more than "
                    "backward_passes_per_step = 1 time(s) before step()", "increase backward_passes_per_step"},
                   "a second backward before step");
      optimizer.step();  // the optimizer is usable again
      optimizer.zero_grad();
      loss().backward();
      optimizer.step();
      // synchronize() then step() outside skip_synchronize: Average only warns.
      optimizer.zero_grad();
      loss().backward();
      optimizer.synchronize();
      optimizer.step();
    }
    {
      hvd::DistributedOptimizer optimizer(sgd, model->named_parameters(), hvd::Compression::none, 2);
      optimizer.zero_grad();
      loss().backward();
      expect_error([&] { optimizer.zero_grad(); }, {"backward_passes_per_step = 2, still accumulating"},
                   "zero_grad between the passes of a step");
      loss().backward();
      expect_error([&] { loss().backward(); }, {"computed more than backward_passes_per_step = 2 time(s)"},
                   "a third backward");
      optimizer.step();
      expect_error([&] { optimizer.set_backward_passes_per_step(0); }, {"must be >= 1, got 0"}, "passes 0");
      optimizer.set_backward_passes_per_step(1);
      LOOM_CHECK(optimizer.backward_passes_per_step() == 1, "set_backward_passes_per_step");
    }
    {
      hvd::DistributedOptimizer optimizer(sgd, model->named_parameters(), hvd::Compression::none, 1, hvd::Sum);
      optimizer.zero_grad();
      loss().backward();
      optimizer.synchronize();
      expect_error([&] { optimizer.step(); }, {"sum the already summed gradients", "skip_synchronize"},
                   "double synchronize with Sum");
      optimizer.zero_grad();
      loss().backward();
      optimizer.synchronize();
      {
        auto guard = optimizer.skip_synchronize();
        optimizer.step();
      }
    }
    // Construction errors.
    ModulePtr other = make_mlp();
    expect_error([&] { hvd::DistributedOptimizer o(sgd, other->named_parameters()); },
                 {"named_parameters was given, but 4 of the optimizer's parameters are not in it",
                  "parameter 0 of group 0, shape [8, 6]"},
                 "unnamed parameters");
    expect_error([&] { hvd::DistributedOptimizer o(sgd, {}, hvd::Compression::none, 0); },
                 {"backward_passes_per_step must be >= 1, got 0"}, "passes 0");
    expect_error([&] { hvd::DistributedOptimizer o(sgd, {}, hvd::Compression::none, 1, hvd::Min); },
                 {"op must be hvd::Average or hvd::Sum, got min"}, "op min");
    expect_error([&] { hvd::DistributedOptimizer o(sgd, {}, hvd::Compression::none, 1, hvd::Sum, 2.0); },
                 {"gradient_predivide_factor other than 1 needs op hvd::Average"}, "predivide with sum");
    expect_error([&] { hvd::DistributedOptimizer o(sgd, {}, nullptr); }, {"compression is null"}, "null");
  });
}

TEST(HvdDistributedOptimizer, SynchronizeThenSkipSynchronizeStepsLikeStep) {
  run_hvd_ranks(2, [](int rank) {
    const std::vector<Batch> batches = make_batches(make_mlp, {6}, 2, 13);
    ModulePtr reference = seeded(make_mlp, 100), model = seeded(make_mlp, 100);
    optim::SGD ref_opt(reference->parameters(), sgd_options());
    optim::SGD sgd(model->parameters(), sgd_options());
    hvd::DistributedOptimizer optimizer(sgd, model->named_parameters(), hvd::Compression::none, 1, hvd::Average,
                                        /*gradient_predivide_factor=*/4.0);
    for (const Batch& b : batches) {
      ref_opt.zero_grad();
      mse_loss(reference->forward(b.x), b.y).backward();
      ref_opt.step();
      optimizer.zero_grad();
      mse_loss(model->forward(shard(b.x, rank, 2)), shard(b.y, rank, 2)).backward();
      optimizer.synchronize();  // e.g. to clip the averaged gradients here
      {
        auto guard = optimizer.skip_synchronize();
        optimizer.step();
      }
      check_close(parameter_values(*model), parameter_values(*reference), "skip_synchronize");
    }
  });
}

// The model and optimizer root_rank would have after seeding them as root.
struct Trained {
  ModulePtr model;
  std::unique_ptr<optim::Optimizer> optimizer;
};

Trained trained_as(int rank, bool adam) {
  Trained t;
  manual_seed(500 + rank);
  t.model = nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 2, 3).padding(1)), nn::BatchNorm2d(2), nn::ReLU(),
                           nn::Flatten(), nn::Linear(2 * 4 * 4, 2))
                .ptr();
  if (adam)
    t.optimizer = std::make_unique<optim::Adam>(t.model->parameters(), optim::AdamOptions(0.01 + rank));
  else
    t.optimizer = std::make_unique<optim::SGD>(t.model->parameters(), optim::SGDOptions(0.1 + rank).momentum(0.9));
  return t;
}

void step_a_few_times(Trained& t, int rank) {
  Generator gen(77 + rank);
  for (int s = 0; s < 2; ++s) {
    t.optimizer->zero_grad();
    mse_loss(t.model->forward(randn({3, 1, 4, 4}, {}, &gen)), randn({3, 2}, {}, &gen)).backward();
    t.optimizer->step();
  }
}

TEST(HvdBroadcast, ParametersBuffersAndOptimizerStateBecomeRootsOnEveryRank) {
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    run_hvd_ranks(world, [world](int rank) {
      const int root = world - 1;
      for (bool adam : {false, true}) {
        const std::string kind = adam ? "Adam" : "SGD";
        // Only root has trained (BatchNorm statistics, optimizer state).
        Trained mine = trained_as(rank, adam);
        if (rank == root) step_a_few_times(mine, rank);
        Trained roots = trained_as(root, adam);
        step_a_few_times(roots, root);

        hvd::broadcast_parameters(mine.model->state_dict(), root);
        std::vector<Tensor> a = mine.model->state_dict().values(), b = roots.model->state_dict().values();
        check_close(a, b, kind + ": state_dict after broadcast_parameters on rank " + std::to_string(rank));

        hvd::broadcast_optimizer_state(*mine.optimizer, root);
        const auto got = mine.optimizer->state_dict(), want = roots.optimizer->state_dict();
        LOOM_CHECK(got.keys() == want.keys(), kind, ": optimizer state keys differ on rank ", rank, " (",
                   got.size(), " vs ", want.size(), ")");
        check_close(got.values(), want.values(), kind + ": optimizer state on rank " + std::to_string(rank));
        LOOM_CHECK(mine.optimizer->param_groups()[0].lr() == roots.optimizer->param_groups()[0].lr(), kind,
                   ": lr ", mine.optimizer->param_groups()[0].lr());
        // From here on every rank trains identically.
        step_a_few_times(mine, 0);
        step_a_few_times(roots, 0);
        check_close(parameter_values(*mine.model), parameter_values(*roots.model), kind + ": after more steps");
      }
      expect_error([] { hvd::broadcast_parameters({}, 5); }, {"root_rank must be in [0, size()"}, "bad root");
    });
  }
}

}  // namespace
}  // namespace loom
