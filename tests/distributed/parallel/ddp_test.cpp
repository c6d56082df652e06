// DistributedDataParallel on 2 and 3 ranks (threads, ProcessGroupGloo over a
// HashStore): every SGD step leaves the parameters equal to one process
// training on the whole batch; buckets, no_sync, gradient_as_bucket_view,
// unused parameters, the construction broadcast and model parallelism.
#include <atomic>
#include <mutex>
#include <thread>

#include "distributed/ProcessGroupGloo.h"
#include "distributed/parallel/DistributedDataParallel.h"
#include "distributed/parallel/SyncBatchNorm.h"
#include "distributed/store/HashStore.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

using std::chrono::milliseconds;
using ModulePtr = std::shared_ptr<nn::Module>;

// Runs fn(group, rank) on `size` threads, one ProcessGroupGloo each over one
// HashStore; fails the test with any rank's exception.
void run_ranks(int size, const std::function<void(ProcessGroupPtr, int)>& fn) {
  auto store = std::make_shared<HashStore>();
  store->set_timeout(milliseconds(10000));
  ProcessGroupGlooOptions options;
  options.timeout = milliseconds(5000);
  std::vector<std::string> failures(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto pg = std::make_shared<ProcessGroupGloo>(store, r, size, options);
        fn(pg, r);
      } catch (const std::exception& e) {
        failures[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) EXPECT_EQ(failures[r], "") << "rank " << r << " of " << size;
}

// Copies of every parameter and buffer value, in state_dict order.
std::vector<Tensor> snapshot(const nn::Module& m) {
  std::vector<Tensor> out;
  for (const auto& [name, t] : m.state_dict()) out.push_back(t.detach().to(Device("cpu")).clone());
  return out;
}

double max_abs_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const auto x = a[i].to_vector<double>();
    const auto y = b[i].to_vector<double>();
    EXPECT_EQ(x.size(), y.size());
    for (size_t k = 0; k < std::min(x.size(), y.size()); ++k)
      worst = std::max(worst, std::abs(x[k] - y[k]));
  }
  return worst;
}

// The gradients of every parameter, flattened into one float64 vector.
std::vector<double> flat_grads(const nn::Module& m) {
  std::vector<double> out;
  for (const Tensor& p : m.parameters()) {
    const auto g = p.grad().to_vector<double>();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

ModulePtr make_mlp() {
  return nn::Sequential(nn::Linear(6, 8), nn::ReLU(), nn::Linear(8, 3)).ptr();
}

// ConvNet-like: conv, batch norm, relu, pool, linear.
ModulePtr make_convnet() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 3, 3).padding(1)), nn::BatchNorm2d(3),
                        nn::ReLU(), nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)),
                        nn::Flatten(), nn::Linear(3 * 2 * 2, 2))
      .ptr();
}

struct Batch {
  Tensor x, y;
};

// Trains `world` DDP ranks and one reference process on the same batches and
// checks, after every step, that each rank's parameters and buffers equal
// the reference's.
void expect_matches_single_process(int world, const std::function<ModulePtr()>& make,
                                   IntList input_shape, DDPOptions options, bool sync_bn) {
  const int64_t batch = 12;  // divisible by 2 and 3
  const int steps = 3;
  manual_seed(11);
  ModulePtr reference = make();
  std::vector<ModulePtr> replicas;
  for (int r = 0; r < world; ++r) replicas.push_back(make());  // different initial values
  replicas[0]->load_state_dict(reference->state_dict());

  Generator gen(5);
  std::vector<Batch> batches;
  IntList xs{batch};
  xs.insert(xs.end(), input_shape.begin(), input_shape.end());
  for (int s = 0; s < steps; ++s) batches.push_back({randn(xs, {}, &gen), Tensor()});
  // Targets of the model's output shape.
  {
    autograd::NoGradGuard no_grad;
    for (auto& b : batches) b.y = randn(make()->forward(b.x).sizes(), {}, &gen);
  }

  std::vector<std::vector<Tensor>> expected;
  {
    optim::SGD opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.5));
    for (const Batch& b : batches) {
      opt.zero_grad();
      mse_loss(reference->forward(b.x), b.y).backward();
      opt.step();
      expected.push_back(snapshot(*reference));
    }
  }

  std::vector<std::vector<double>> losses(world), grads(world);
  run_ranks(world, [&](ProcessGroupPtr pg, int r) {
    ModulePtr model = replicas[r];
    if (sync_bn) model = nn::convert_sync_batchnorm(model, pg);
    DistributedDataParallel ddp(model, pg, options);
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.5));
    const int64_t shard = batch / world;
    for (int s = 0; s < steps; ++s) {
      Tensor x = batches[s].x.narrow(0, r * shard, shard);
      Tensor y = batches[s].y.narrow(0, r * shard, shard);
      opt.zero_grad();
      Tensor loss = mse_loss(ddp->forward(x), y);
      loss.backward();
      losses[r].push_back(loss.item());
      if (s == 0) grads[r] = flat_grads(*model);
      opt.step();
      EXPECT_LE(max_abs_diff(snapshot(*model), expected[s]), 1e-5)
          << "rank " << r << " of " << world << " after step " << s;
    }
  });
  // Each rank saw different data (different losses) but got the same gradients.
  for (int r = 1; r < world; ++r) {
    EXPECT_NE(losses[r][0], losses[0][0]);
    ASSERT_EQ(grads[r].size(), grads[0].size());
    for (size_t k = 0; k < grads[0].size(); ++k) EXPECT_EQ(grads[r][k], grads[0][k]) << k;
  }
}

TEST(BucketAssignment, ReverseOrderFirstBucketSmallPerDtype) {
  // 100k floats = 400 kB each.
  std::vector<Tensor> params;
  for (int i = 0; i < 6; ++i) params.push_back(zeros({100000}));
  params.push_back(zeros({10}, kFloat64));
  const auto buckets = compute_bucket_assignment(params, kDefaultFirstBucketBytes, 1000000);
  // First float bucket closes once >= 1 MiB: params 5, 4, 3 (1.2 MB); then 2, 1, 0
  // reach 1.2 MB >= 1 MB.  The float64 one stays open and closes at the end.
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0], (std::vector<size_t>{5, 4, 3}));
  EXPECT_EQ(buckets[1], (std::vector<size_t>{2, 1, 0}));
  EXPECT_EQ(buckets[2], (std::vector<size_t>{6}));
  // Bigger bucket limit: the first bucket stays at ~1 MiB, the rest share one.
  const auto two = compute_bucket_assignment(params, kDefaultFirstBucketBytes, 25 << 20);
  ASSERT_EQ(two.size(), 3u);
  EXPECT_EQ(two[0], (std::vector<size_t>{5, 4, 3}));
  EXPECT_EQ(two[1], (std::vector<size_t>{6}));  // closes at the end, first param 6
  EXPECT_EQ(two[2], (std::vector<size_t>{2, 1, 0}));
  EXPECT_LOOM_ERROR(compute_bucket_assignment(params, 0, 1), "must be positive");
}

TEST(BucketAssignment, BucketViewsShareTheFlatBuffer) {
  std::vector<Tensor> params{zeros({2, 3}), zeros({4})};
  Bucket b = make_bucket(params, {1, 0});
  EXPECT_EQ(b.flat.numel(), 10);
  EXPECT_EQ(b.offsets, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(b.views[1].sizes(), (IntList{2, 3}));
  b.views[1].fill_(2.0);
  EXPECT_EQ(b.flat.to_vector<float>()[4], 2.0f);
  EXPECT_EQ(b.flat.to_vector<float>()[3], 0.0f);
}

TEST(DistributedDataParallel, MlpMatchesSingleProcessOn2And3Ranks) {
  for (int world : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    expect_matches_single_process(world, make_mlp, {6}, DDPOptions(), false);
  }
}

TEST(DistributedDataParallel, ManySmallBucketsAndBucketViewsMatchToo) {
  DDPOptions options;
  options.first_bucket_cap_mb = 1e-5;  // ~10 bytes: one parameter per bucket
  options.bucket_cap_mb = 1e-4;
  expect_matches_single_process(2, make_mlp, {6}, options, false);
  options.gradient_as_bucket_view = true;
  expect_matches_single_process(3, make_mlp, {6}, options, false);
}

TEST(DistributedDataParallel, SyncBatchNormConvNetMatchesSingleProcess) {
  for (int world : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    expect_matches_single_process(world, make_convnet, {1, 4, 4}, DDPOptions(), true);
  }
}

TEST(DistributedDataParallel, ModuleHolderInterface) {
  run_ranks(2, [](ProcessGroupPtr pg, int) {
    nn::Linear fc(3, 2);
    DistributedDataParallel ddp(fc, pg);
    EXPECT_EQ(ddp->parameters().size(), 2u);
    EXPECT_TRUE(ddp->module() == fc.ptr());
    EXPECT_TRUE(ddp->module_as<nn::LinearImpl>() == fc.ptr());
    const auto keys = ddp->state_dict().keys();
    EXPECT_EQ(keys, (std::vector<std::string>{"module.weight", "module.bias"}));
    // Reverse registration order: bias first.
    EXPECT_EQ(ddp->bucket_parameter_names(),
              (std::vector<std::vector<std::string>>{{"bias", "weight"}}));
    EXPECT_EQ(ddp->bucket_sizes(), (std::vector<size_t>{8 * 4}));
    Tensor y = ddp(ones({4, 3}));
    EXPECT_EQ(y.sizes(), (IntList{4, 2}));
  });
}

TEST(DistributedDataParallel, ConstructionBroadcastsRankZerosValues) {
  manual_seed(3);
  std::vector<ModulePtr> models{make_convnet(), make_convnet(), make_convnet()};
  // Different buffers too.
  for (int r = 0; r < 3; ++r) {
    auto bn = std::dynamic_pointer_cast<nn::BatchNorm2dImpl>(
        std::dynamic_pointer_cast<nn::SequentialImpl>(models[r])->operator[](1));
    bn->running_mean.fill_(static_cast<double>(r));
  }
  ASSERT_GT(max_abs_diff(snapshot(*models[0]), snapshot(*models[1])), 1e-3);
  const auto expected = snapshot(*models[0]);
  run_ranks(3, [&](ProcessGroupPtr pg, int r) {
    DistributedDataParallel ddp(models[r], pg);
    EXPECT_EQ(max_abs_diff(snapshot(*models[r]), expected), 0.0) << "rank " << r;
  });
}

TEST(BroadcastCoalesced, MixedDtypesAndNonContiguousTensorsGetRootsValues) {
  run_ranks(3, [](ProcessGroupPtr pg, int r) {
    const double base = 10.0 * (r + 1);
    Tensor f32 = arange(6).to(kFloat32) + base;
    Tensor f64 = (arange(4).to(kFloat64) + base).view({2, 2});
    Tensor i64 = arange(3) + static_cast<int64_t>(base);
    Tensor flags = full({5}, r == 1, TensorOptions(kBool));
    Tensor wide = (arange(12).to(kFloat32) + base).view({3, 4});
    Tensor column = wide.t().select(0, 1);  // a strided view: writes go into `wide`
    Tensor empty_one = empty({0});
    broadcast_coalesced({f32, f64, i64, flags, column, empty_one}, pg, /*root=*/1);
    EXPECT_TRUE(testing::AllClose(f32, arange(6).to(kFloat32) + 20.0, 0, 0)) << "rank " << r;
    EXPECT_TRUE(testing::AllClose(f64, (arange(4).to(kFloat64) + 20.0).view({2, 2}), 0, 0));
    EXPECT_EQ(i64.to_vector<int64_t>(), (std::vector<int64_t>{20, 21, 22}));
    EXPECT_EQ(flags.to(kInt64).to_vector<int64_t>(), std::vector<int64_t>(5, 1));
    Tensor expected_wide = (arange(12).to(kFloat32) + base).view({3, 4});
    expected_wide.t().select(0, 1).copy_((arange(12).to(kFloat32) + 20.0).view({3, 4}).t().select(0, 1));
    EXPECT_TRUE(testing::AllClose(wide, expected_wide, 0, 0)) << "rank " << r;
  });
}

TEST(DistributedDataParallel, MismatchedReplicasAreAnErrorOnEveryRank) {
  std::atomic<int> errors{0};
  run_ranks(2, [&](ProcessGroupPtr pg, int r) {
    ModulePtr model = nn::Sequential(nn::Linear(4, r == 0 ? 5 : 6), nn::Linear(r == 0 ? 5 : 6, 2)).ptr();
    try {
      DistributedDataParallel ddp(model, pg);
      ADD_FAILURE() << "rank " << r << ": expected an error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_THAT(what, ::testing::HasSubstr("replicas differ"));
      EXPECT_THAT(what, ::testing::HasSubstr("0.weight"));
      EXPECT_THAT(what, ::testing::HasSubstr("[5, 4]"));
      EXPECT_THAT(what, ::testing::HasSubstr("[6, 4]"));
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 2);
}

TEST(DistributedDataParallel, NoSyncAccumulatesLocallyThenReducesOnce) {
  // Two micro-batches per rank: the first under no_sync, the second synced.
  // The result equals one process accumulating both micro-batches' losses.
  const int world = 2;
  const int64_t micro = 4;
  manual_seed(21);
  ModulePtr reference = make_mlp();
  std::vector<ModulePtr> replicas{make_mlp(), make_mlp()};
  Generator gen(9);
  Tensor xa = randn({micro * world, 6}, {}, &gen), xb = randn({micro * world, 6}, {}, &gen);
  Tensor ya = randn({micro * world, 3}, {}, &gen), yb = randn({micro * world, 3}, {}, &gen);
  replicas[0]->load_state_dict(reference->state_dict());
  std::vector<Tensor> expected;
  {
    optim::SGD opt(reference->parameters(), optim::SGDOptions(0.1));
    mse_loss(reference->forward(xa), ya).backward();
    mse_loss(reference->forward(xb), yb).backward();
    opt.step();
    expected = snapshot(*reference);
  }
  for (bool as_view : {false, true}) {
    std::vector<ModulePtr> models{make_mlp(), make_mlp()};
    models[0]->load_state_dict(replicas[0]->state_dict());
    std::vector<std::vector<double>> local(world);
    run_ranks(world, [&](ProcessGroupPtr pg, int r) {
      DDPOptions options;
      options.gradient_as_bucket_view = as_view;
      DistributedDataParallel ddp(models[r], pg, options);
      optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1));
      opt.zero_grad();
      {
        auto guard = ddp->no_sync();
        EXPECT_FALSE(ddp->require_gradient_sync());
        mse_loss(ddp->forward(xa.narrow(0, r * micro, micro)), ya.narrow(0, r * micro, micro))
            .backward();
      }
      EXPECT_TRUE(ddp->require_gradient_sync());
      local[r] = flat_grads(*models[r]);
      mse_loss(ddp->forward(xb.narrow(0, r * micro, micro)), yb.narrow(0, r * micro, micro))
          .backward();
      opt.step();
      EXPECT_LE(max_abs_diff(snapshot(*models[r]), expected), 1e-5) << "rank " << r;
    });
    // Under no_sync nothing was exchanged: the ranks' gradients differed.
    EXPECT_NE(local[0], local[1]) << "as_view " << as_view;
  }
}

// y = b(relu(a(x))) [+ extra(x) when use_extra]
class BranchyImpl : public nn::Module {
 public:
  BranchyImpl() : Module("Branchy") {
    a = register_module("a", nn::Linear(4, 5));
    b = register_module("b", nn::Linear(5, 2));
    extra = register_module("extra", nn::Linear(4, 2));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = b(a(x).relu());
    return use_extra ? y + extra(x) : y;
  }
  nn::Linear a{nullptr}, b{nullptr}, extra{nullptr};
  bool use_extra = false;
};

TEST(DistributedDataParallel, UnusedParameterIsAnErrorNamingItNotAHang) {
  run_ranks(2, [](ProcessGroupPtr pg, int r) {
    auto model = std::make_shared<BranchyImpl>();
    DistributedDataParallel ddp(model, pg);
    Tensor x = full({3, 4}, 0.5 + r);
    EXPECT_LOOM_ERROR(ddp->forward(x).sum().backward(), "extra.weight", "extra.bias",
                      "find_unused_parameters");
    // The reducer recovers: with every parameter used, the next step works.
    model->use_extra = true;
    model->zero_grad();
    ddp->forward(x).sum().backward();
    EXPECT_TRUE(model->extra->weight.grad().defined());
  });
}

TEST(DistributedDataParallel, FindUnusedParametersHandlesPerRankUsage) {
  // Rank 0 uses `extra`, rank 1 does not: its gradient is rank 0's halved;
  // a parameter no rank uses keeps an undefined .grad.
  manual_seed(2);
  auto probe = std::make_shared<BranchyImpl>();
  const auto init = probe->state_dict();
  std::vector<std::vector<double>> extra_grad(2), a_grad(2);
  std::vector<Tensor> reference_extra(2);
  Tensor x0 = full({3, 4}, 0.5), x1 = full({3, 4}, -0.25);
  {
    // What rank 0 alone would compute for extra.weight.
    auto m = std::make_shared<BranchyImpl>();
    m->load_state_dict(init);
    m->use_extra = true;
    m->forward(x0).sum().backward();
    reference_extra[0] = m->extra->weight.grad().clone();
  }
  for (bool as_view : {false, true}) {
    run_ranks(2, [&](ProcessGroupPtr pg, int r) {
      auto model = std::make_shared<BranchyImpl>();
      model->load_state_dict(init);
      DDPOptions options;
      options.find_unused_parameters = true;
      options.gradient_as_bucket_view = as_view;
      DistributedDataParallel ddp(model, pg, options);
      model->use_extra = r == 0;
      ddp->forward(r == 0 ? x0 : x1).sum().backward();
      ASSERT_TRUE(model->extra->weight.grad().defined());
      extra_grad[r] = model->extra->weight.grad().to_vector<double>();
      a_grad[r] = model->a->weight.grad().to_vector<double>();
      // Nobody uses extra now: its gradient is left alone (zeroed by none).
      model->zero_grad();
      model->use_extra = false;
      ddp->forward(r == 0 ? x0 : x1).sum().backward();
      EXPECT_FALSE(model->extra->weight.grad().defined());
      EXPECT_TRUE(model->a->weight.grad().defined());
    });
    EXPECT_EQ(extra_grad[0], extra_grad[1]);
    EXPECT_EQ(a_grad[0], a_grad[1]);
    const auto ref = reference_extra[0].to_vector<double>();
    ASSERT_EQ(extra_grad[0].size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k) EXPECT_NEAR(extra_grad[0][k], ref[k] / 2, 1e-6);
  }
}

// Model parallel inside DDP: `a` on cpu:0, `b` on cpu:1.
class SplitImpl : public nn::Module {
 public:
  SplitImpl() : Module("Split") {
    a = register_module("a", nn::Linear(4, 6));
    b = register_module("b", nn::Linear(6, 2));
    b->to(Device("cpu:1"));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = a(x).relu().to(Device("cpu:1"));
    return b(h).to(Device("cpu"));
  }
  nn::Linear a{nullptr}, b{nullptr};
};

TEST(DistributedDataParallel, ModelSpreadOverTwoDevices) {
  manual_seed(8);
  auto reference = std::make_shared<SplitImpl>();
  std::vector<std::shared_ptr<SplitImpl>> models{std::make_shared<SplitImpl>(),
                                                 std::make_shared<SplitImpl>()};
  models[0]->load_state_dict(reference->state_dict());
  Generator gen(4);
  Tensor x = randn({8, 4}, {}, &gen), y = randn({8, 2}, {}, &gen);
  std::vector<std::vector<Tensor>> expected;
  {
    optim::SGD opt(reference->parameters(), optim::SGDOptions(0.2));
    for (int s = 0; s < 3; ++s) {
      opt.zero_grad();
      mse_loss(reference->forward(x), y).backward();
      opt.step();
      expected.push_back(snapshot(*reference));
    }
  }
  run_ranks(2, [&](ProcessGroupPtr pg, int r) {
    DistributedDataParallel ddp(models[r], pg);
    // One bucket per device, each holding one device's parameters.
    const auto& buckets = ddp->reducer().buckets();
    ASSERT_EQ(buckets.size(), 2u);
    EXPECT_NE(buckets[0].device, buckets[1].device);
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.2));
    for (int s = 0; s < 3; ++s) {
      opt.zero_grad();
      mse_loss(ddp->forward(x.narrow(0, r * 4, 4)), y.narrow(0, r * 4, 4)).backward();
      EXPECT_EQ(models[r]->b->weight.grad().device(), Device("cpu:1"));
      opt.step();
      EXPECT_LE(max_abs_diff(snapshot(*models[r]), expected[s]), 1e-5) << "rank " << r;
    }
  });
}

TEST(DistributedDataParallel, DeviceIdsMustMatchTheParameters) {
  run_ranks(2, [](ProcessGroupPtr pg, int) {
    DDPOptions options;
    options.device_ids = {Device("cpu:1")};
    EXPECT_LOOM_ERROR(DistributedDataParallel(make_mlp(), pg, options), "device_ids",
                      "is on cpu");
  });
}

TEST(DistributedDataParallel, TimelineShowsBucketsLaunchedBeforeBackwardEnds) {
  run_ranks(2, [](ProcessGroupPtr pg, int r) {
    manual_seed(1);
    ModulePtr model = nn::Sequential(nn::Linear(16, 64), nn::ReLU(), nn::Linear(64, 64),
                                     nn::ReLU(), nn::Linear(64, 64), nn::ReLU(),
                                     nn::Linear(64, 4))
                          .ptr();
    DDPOptions options;
    options.first_bucket_cap_mb = 1e-3;  // ~1 kB
    options.bucket_cap_mb = 8e-3;        // ~8 kB: one Linear weight per bucket
    DistributedDataParallel ddp(model, pg, options);
    EXPECT_GE(ddp->bucket_sizes().size(), 4u);
    ddp->forward(full({32, 16}, 0.1 * (r + 1))).sum().backward();
    const ReducerTimeline tl = ddp->last_timeline();
    ASSERT_EQ(tl.buckets.size(), ddp->bucket_sizes().size());
    EXPECT_GE(tl.ms(tl.backward_end), 0.0);
    EXPECT_GE(tl.ms(tl.reduced), tl.ms(tl.backward_end));
    for (size_t b = 0; b < tl.buckets.size(); ++b) {
      const auto& bt = tl.buckets[b];
      EXPECT_GE(tl.ms(bt.ready), 0.0) << b;
      EXPECT_GE(tl.ms(bt.launched), tl.ms(bt.ready)) << b;
      EXPECT_GE(tl.ms(bt.finished), tl.ms(bt.launched)) << b;
      if (b > 0) {
        EXPECT_GE(tl.ms(bt.launched), tl.ms(tl.buckets[b - 1].launched)) << b;
      }
    }
    // The first bucket (the last layer) is launched while backward still runs:
    // before the first layer's gradients (the last bucket) were ready.
    EXPECT_LE(tl.ms(tl.buckets[0].launched), tl.ms(tl.buckets.back().ready));
    EXPECT_LE(tl.ms(tl.buckets[0].launched), tl.ms(tl.backward_end));
  });
}

TEST(DistributedDataParallel, Fp16AndBf16CompressHooksAverageIn16Bits) {
  // Each rank's gradients, averaged over 2 ranks through a 16-bit wire: the
  // same as averaging the ranks' gradients after rounding each (divided by
  // 2) to the wire dtype, and within the wire's precision of the float32
  // average.
  const int world = 2;
  Generator gen(5);
  const Tensor x = randn({8, 6}, {}, &gen), y = randn({8, 3}, {}, &gen);
  for (auto [hook, wire] :
       {std::pair{DistributedDataParallelImpl::CommHook::kFp16Compress, kFloat16},
        std::pair{DistributedDataParallelImpl::CommHook::kBf16Compress, kBFloat16}}) {
    manual_seed(22);
    ModulePtr first = make_mlp();
    std::vector<ModulePtr> models{first, make_mlp()};
    models[1]->load_state_dict(first->state_dict());
    // Each rank's own float32 gradients, computed without DDP.
    std::vector<std::vector<double>> own(world);
    for (int r = 0; r < world; ++r) {
      ModulePtr copy = make_mlp();
      copy->load_state_dict(first->state_dict());
      mse_loss(copy->forward(x.narrow(0, r * 4, 4)), y.narrow(0, r * 4, 4)).backward();
      std::vector<double> g;
      for (const Tensor& p : copy->parameters()) {
        const auto v = (p.grad() / 2.0).to(wire).to_vector<double>();
        g.insert(g.end(), v.begin(), v.end());
      }
      own[r] = g;
    }
    std::vector<std::vector<double>> got(world);
    run_ranks(world, [&](ProcessGroupPtr pg, int r) {
      DistributedDataParallel ddp(models[r], pg);
      ddp->register_comm_hook(hook);
      mse_loss(ddp->forward(x.narrow(0, r * 4, 4)), y.narrow(0, r * 4, 4)).backward();
      got[r] = flat_grads(*models[r]);
    });
    ASSERT_EQ(got[0].size(), own[0].size());
    EXPECT_EQ(got[0], got[1]) << dtype_name(wire) << ": ranks disagree";
    for (size_t i = 0; i < got[0].size(); ++i) {
      // The wire's sum of the two halves, rounded once more.
      const double want = static_cast<double>(
          static_cast<float>(full({}, own[0][i] + own[1][i], TensorOptions(wire)).item<double>()));
      ASSERT_EQ(got[0][i], want) << dtype_name(wire) << " element " << i;
    }
  }
}

}  // namespace
}  // namespace distributed
}  // namespace loom
