// nn::DataParallel on CPU logical devices: outputs, loss and every parameter
// gradient equal the module's on the whole batch (max relative error <=
// 1e-5, float32) on 2 and 3 devices, for batches that do and do not divide
// evenly and batches smaller than the device count; nested inputs and
// outputs; replicas kept across optimizer steps stay exact (parameters and
// buffers re-copied when they change, skipped when they do not); BatchNorm's
// per-chunk semantics; and the errors.
#include <tuple>

#include "tests/TestUtil.h"

namespace loom {
namespace {

const Device kCpu0("cpu:0"), kCpu1("cpu:1"), kCpu2("cpu:2");

// max |a - b| / max |b|: the "max relative error".
double max_rel_error(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.sizes(), expected.sizes());
  const auto a = actual.to_vector<double>();
  const auto b = expected.to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// Convolution + two linear layers, optionally with BatchNorm after the
// convolution.  Input (N, 3, 6, 6) -> logits (N, 5).
class NetImpl : public nn::Cloneable<NetImpl> {
 public:
  explicit NetImpl(bool batch_norm = false) : Cloneable("Net"), batch_norm(batch_norm) { reset(); }
  void reset() override {
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)));
    if (batch_norm) bn = register_module("bn", nn::BatchNorm2d(4));
    fc1 = register_module("fc1", nn::Linear(4 * 6 * 6, 16));
    fc2 = register_module("fc2", nn::Linear(16, 5));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = conv(x);
    if (batch_norm) h = bn(h);
    return fc2(relu(fc1(relu(h).flatten(1))));
  }
  bool batch_norm;
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
LOOM_MODULE(Net);

std::shared_ptr<NetImpl> copy_of(const Net& net) {
  return std::dynamic_pointer_cast<NetImpl>(net->clone());
}

struct Batch {
  Tensor x, y;
};

Batch make_batch(int64_t n, uint64_t seed) {
  Generator gen(seed);
  return {randn({n, 3, 6, 6}, kFloat32, &gen), randint(0, 5, {n}, kInt64, &gen)};
}

std::vector<Device> first_devices(size_t n) {
  std::vector<Device> all{kCpu0, kCpu1, kCpu2};
  return std::vector<Device>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
}

// Compares DataParallel over `devices` with the module on the whole batch:
// logits, loss and every parameter gradient.
void expect_same_as_whole_batch(size_t devices, int64_t batch, nn::Replication replication) {
  SCOPED_TRACE(::testing::Message() << devices << " devices, batch " << batch);
  manual_seed(1);
  Net model;
  auto reference = copy_of(model);
  nn::DataParallel dp(model, first_devices(devices));
  dp->set_replication(replication);
  const Batch b = make_batch(batch, 7);

  Tensor want_logits = reference->forward(b.x);
  Tensor want_loss = cross_entropy(want_logits, b.y);
  want_loss.backward();

  Tensor logits = dp(b.x);
  EXPECT_EQ(logits.device(), kCpu0);
  Tensor loss = cross_entropy(logits, b.y);
  loss.backward();
  EXPECT_EQ(dp->last_stats().replicas, std::min<int64_t>(batch, static_cast<int64_t>(devices)));

  EXPECT_LE(max_rel_error(logits, want_logits), 1e-5);
  EXPECT_LE(max_rel_error(loss, want_loss), 1e-5);
  const auto want = reference->named_parameters();
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().device(), kCpu0) << name;
    EXPECT_LE(max_rel_error(p.grad(), want.at(name).grad()), 1e-5) << name;
  }
}

TEST(DataParallel, TwoDevicesEqualTheWholeBatch) {
  expect_same_as_whole_batch(2, 8, nn::Replication::kKeep);
  expect_same_as_whole_batch(2, 7, nn::Replication::kKeep);  // 4 + 3
}

TEST(DataParallel, ThreeDevicesEqualTheWholeBatch) {
  expect_same_as_whole_batch(3, 9, nn::Replication::kKeep);
  expect_same_as_whole_batch(3, 7, nn::Replication::kKeep);  // 3 + 3 + 1
  expect_same_as_whole_batch(3, 5, nn::Replication::kKeep);  // 2 + 2 + 1
}

TEST(DataParallel, BatchSmallerThanTheDevicesUsesFewerReplicas) {
  expect_same_as_whole_batch(3, 2, nn::Replication::kKeep);  // 1 + 1: two replicas
  expect_same_as_whole_batch(3, 1, nn::Replication::kKeep);  // replica 0 alone
}

TEST(DataParallel, EveryReplicationGivesTheSameResults) {
  expect_same_as_whole_batch(3, 7, nn::Replication::kKeepCopies);
  expect_same_as_whole_batch(2, 2, nn::Replication::kKeepCopies);
  expect_same_as_whole_batch(3, 7, nn::Replication::kBroadcastAll);
  expect_same_as_whole_batch(3, 7, nn::Replication::kCloneEveryForward);
}

TEST(DataParallel, OneDeviceCallsTheModuleDirectly) {
  manual_seed(2);
  Net model;
  auto reference = copy_of(model);
  nn::DataParallel dp(model, {kCpu0});
  const Batch b = make_batch(4, 3);
  EXPECT_TRUE(testing::AllClose(dp(b.x), reference->forward(b.x), 0, 0));
  EXPECT_EQ(dp->last_stats().replicas, 0);  // no replicas involved
}

TEST(DataParallel, InputGradientsFlowBackThroughTheScatter) {
  manual_seed(3);
  Net model;
  auto reference = copy_of(model);
  nn::DataParallel dp(model, {kCpu0, kCpu1, kCpu2});
  const Batch b = make_batch(7, 4);
  Tensor x1 = b.x.clone().requires_grad_();
  Tensor x2 = b.x.clone().requires_grad_();
  cross_entropy(dp(x1), b.y).backward();
  cross_entropy(reference->forward(x2), b.y).backward();
  ASSERT_TRUE(x1.grad().defined());
  EXPECT_LE(max_rel_error(x1.grad(), x2.grad()), 1e-5);
}

// Several SGD steps: the kept replicas follow the parameters exactly; with
// kKeepCopies every changed parameter is copied, with kKeep (CPU logical
// devices) the replicas share the parameters' memory and copy nothing.
void expect_replicas_follow_optimizer_steps(nn::Replication replication) {
  SCOPED_TRACE(replication == nn::Replication::kKeep ? "kKeep" : "kKeepCopies");
  manual_seed(4);
  Net model;
  auto reference = copy_of(model);
  nn::DataParallel dp(model, {kCpu0, kCpu1, kCpu2});
  dp->set_replication(replication);
  const bool shared = replication == nn::Replication::kKeep;
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  const int64_t n_params = static_cast<int64_t>(model->parameters().size());
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const Batch b = make_batch(8, 10 + step);
    opt.zero_grad();
    ref_opt.zero_grad();
    Tensor logits = dp(b.x);
    Tensor want = reference->forward(b.x);
    EXPECT_LE(max_rel_error(logits, want), 1e-5);
    cross_entropy(logits, b.y).backward();
    cross_entropy(want, b.y).backward();
    const nn::ReplicationStats& stats = dp->last_stats();
    if (step == 0) {
      EXPECT_EQ(stats.replicas_built, 2);
      EXPECT_EQ(stats.tensors_shared, shared ? 2 * n_params : 0);
    } else {
      // Every parameter changed in the last step: copied to both replicas,
      // or seen there already through the shared memory.
      EXPECT_EQ(stats.replicas_built, 0);
      EXPECT_EQ(stats.tensors_copied, shared ? 0 : 2 * n_params);
      EXPECT_EQ(stats.tensors_skipped, shared ? 2 * n_params : 0);
      EXPECT_EQ(stats.tensors_shared, 0);
    }
    opt.step();
    ref_opt.step();
  }
  const auto want = reference->named_parameters();
  for (const auto& [name, p] : model->named_parameters())
    EXPECT_LE(max_rel_error(p, want.at(name)), 1e-5) << name;
}

TEST(DataParallel, KeptReplicasFollowOptimizerSteps) {
  expect_replicas_follow_optimizer_steps(nn::Replication::kKeep);
  expect_replicas_follow_optimizer_steps(nn::Replication::kKeepCopies);
}

TEST(DataParallel, UnchangedTensorsAreNotCopiedAgain) {
  manual_seed(5);
  Net model;
  nn::DataParallel dp(model, {kCpu0, kCpu1});
  dp->set_replication(nn::Replication::kKeepCopies);  // copies, as on GPUs
  const Batch b = make_batch(6, 5);
  const int64_t n_params = static_cast<int64_t>(model->parameters().size());
  {
    NoGradGuard no_grad;
    Tensor first = dp(b.x);
    EXPECT_EQ(dp->last_stats().replicas_built, 1);
    Tensor second = dp(b.x);
    EXPECT_EQ(dp->last_stats().tensors_copied, 0);
    EXPECT_EQ(dp->last_stats().tensors_skipped, n_params);
    EXPECT_TRUE(testing::AllClose(first, second, 0, 0));
  }
  // Gradient accumulation: two forwards and backwards before a step copy nothing.
  cross_entropy(dp(b.x), b.y).backward();
  cross_entropy(dp(b.x), b.y).backward();
  EXPECT_EQ(dp->last_stats().tensors_copied, 0);

  // A frozen layer is never copied again; the trained ones are.
  model->conv->weight.requires_grad_(false);
  model->conv->bias.requires_grad_(false);
  model->zero_grad();
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
  cross_entropy(dp(b.x), b.y).backward();
  opt.step();
  (void)dp(b.x);
  EXPECT_EQ(dp->last_stats().tensors_copied, n_params - 2);
  EXPECT_EQ(dp->last_stats().tensors_skipped, 2);

  // kBroadcastAll copies everything every time.
  dp->set_replication(nn::Replication::kBroadcastAll);
  (void)dp(b.x);
  (void)dp(b.x);
  EXPECT_EQ(dp->last_stats().tensors_copied, n_params);
  EXPECT_EQ(dp->last_stats().replicas_built, 0);
  dp->set_replication(nn::Replication::kCloneEveryForward);
  (void)dp(b.x);
  (void)dp(b.x);
  EXPECT_EQ(dp->last_stats().replicas_built, 1);
}

TEST(DataParallel, LoadStateDictReachesTheReplicas) {
  for (nn::Replication replication : {nn::Replication::kKeep, nn::Replication::kKeepCopies}) {
    manual_seed(6);
    Net model;
    Net other;
    nn::DataParallel dp(model, {kCpu0, kCpu1});
    dp->set_replication(replication);
    const Batch b = make_batch(6, 6);
    (void)dp(b.x);
    model->load_state_dict(other->state_dict());
    EXPECT_LE(max_rel_error(dp(b.x), other->forward(b.x)), 1e-5);
    // Moving the module away and back reaches them too (new memory).
    model->to(kCpu1);
    model->to(kCpu0);
    Net third;
    model->load_state_dict(third->state_dict());
    EXPECT_LE(max_rel_error(dp(b.x), third->forward(b.x)), 1e-5);
  }
}

// y = x (w1 + w2): the sum's backward may hand the same gradient tensor to
// both parameters' broadcasts; a replica must not hand over (without a
// copy) memory another gradient still uses.
class TiedSumImpl : public nn::Cloneable<TiedSumImpl> {
 public:
  TiedSumImpl() : Cloneable("TiedSum") { reset(); }
  void reset() override {
    w1 = register_parameter("w1", randn({4, 3}));
    w2 = register_parameter("w2", randn({4, 3}));
  }
  Tensor forward(const Tensor& x) override { return x.matmul(w1 + w2).relu(); }
  Tensor w1, w2;
};
LOOM_MODULE(TiedSum);

TEST(DataParallel, SharedGradientsStayExact) {
  manual_seed(12);
  TiedSum model;
  auto reference = std::dynamic_pointer_cast<TiedSumImpl>(model->clone());
  nn::DataParallel dp(model, {kCpu0, kCpu1, kCpu2});
  Tensor x = randn({7, 4});
  (dp(x) * 2).sum().backward();
  (reference->forward(x) * 2).sum().backward();
  EXPECT_LE(max_rel_error(model->w1.grad(), reference->w1.grad()), 1e-5);
  EXPECT_LE(max_rel_error(model->w2.grad(), reference->w2.grad()), 1e-5);
  EXPECT_LE(max_rel_error(model->w1.grad(), model->w2.grad()), 1e-6);
}

TEST(DataParallel, BuildingReplicasDrawsNoRandomNumbers) {
  Net model;
  nn::DataParallel dp(model, {kCpu0, kCpu1, kCpu2});
  const Batch b = make_batch(6, 8);
  manual_seed(11);
  (void)dp(b.x);  // clones two replicas
  Tensor after = randn({4});
  manual_seed(11);
  EXPECT_TRUE(testing::AllClose(after, randn({4}), 0, 0));
}

// Train mode: every replica normalises its chunk with the chunk's own
// statistics; the module's running statistics are replica 0's (chunk 0's).
TEST(DataParallel, BatchNormStatisticsPerChunkAndReplicaZerosAreKept) {
  manual_seed(7);
  Net model(true);
  auto per_chunk = copy_of(model);
  auto chunk0_only = copy_of(model);
  nn::DataParallel dp(model, {kCpu0, kCpu1});
  const Batch b = make_batch(7, 9);  // chunks of 4 and 3
  const auto chunks = b.x.chunk(2, 0);

  Tensor logits = dp(b.x);
  Tensor want = cat({per_chunk->forward(chunks[0]), per_chunk->forward(chunks[1])}, 0);
  EXPECT_LE(max_rel_error(logits, want), 1e-5);
  (void)chunk0_only->forward(chunks[0]);
  EXPECT_LE(max_rel_error(model->bn->running_mean, chunk0_only->bn->running_mean), 1e-5);
  EXPECT_LE(max_rel_error(model->bn->running_var, chunk0_only->bn->running_var), 1e-5);
  EXPECT_EQ(model->bn->num_batches_tracked.item<int64_t>(), 1);

  // Next forward: replica 1 starts again from the module's statistics (its
  // own update of the last forward is overwritten), as PyTorch's replicas do.
  auto before = copy_of(model);
  const Batch c = make_batch(6, 10);
  (void)dp(c.x);
  (void)before->forward(c.x.chunk(2, 0)[1]);
  auto replica1 = std::dynamic_pointer_cast<NetImpl>(dp->replica(1));
  ASSERT_NE(replica1, nullptr);
  EXPECT_LE(max_rel_error(replica1->bn->running_mean, before->bn->running_mean), 1e-5);
  EXPECT_LE(max_rel_error(replica1->bn->running_var, before->bn->running_var), 1e-5);
  EXPECT_EQ(model->bn->num_batches_tracked.item<int64_t>(), 2);

  // Eval: the running statistics (copied to every replica) normalise, so
  // DataParallel equals the module on the whole batch.
  model->eval();
  auto whole = copy_of(model);
  NoGradGuard no_grad;
  EXPECT_LE(max_rel_error(dp(b.x), whole->forward(b.x)), 1e-5);
  EXPECT_FALSE(replica1->is_training());
  EXPECT_FALSE(replica1->bn->is_training());
}

// A module with nested inputs and outputs, through forward_with.
class TwoHeadsImpl : public nn::Cloneable<TwoHeadsImpl> {
 public:
  TwoHeadsImpl() : Cloneable("TwoHeads") { reset(); }
  void reset() override {
    a = register_module("a", nn::Linear(4, 3));
    b = register_module("b", nn::Linear(2, 3));
  }
  // x (N, 4); extra: {(N, 2), (N, 2)}; pair.first (N, 3), pair.second a scale.
  std::tuple<Tensor, std::vector<Tensor>> forward(const Tensor& x, const std::vector<Tensor>& extra,
                                                  const std::pair<Tensor, double>& shift) {
    Tensor h = a(x) + shift.first * shift.second;
    std::vector<Tensor> heads;
    for (const Tensor& e : extra) heads.push_back(b(e) * h);
    return {h.sum({1}), heads};
  }
  nn::Linear a{nullptr}, b{nullptr};
};
LOOM_MODULE(TwoHeads);

TEST(DataParallel, NestedInputsAndOutputs) {
  manual_seed(8);
  TwoHeads model;
  auto reference = std::dynamic_pointer_cast<TwoHeadsImpl>(model->clone());
  nn::DataParallel dp(model, {kCpu0, kCpu1, kCpu2});
  const int64_t n = 7;
  Tensor x = randn({n, 4});
  std::vector<Tensor> extra{randn({n, 2}), randn({n, 2})};
  std::pair<Tensor, double> shift{randn({n, 3}), 0.5};
  auto fn = [](TwoHeadsImpl& m, const Tensor& x, const std::vector<Tensor>& extra,
               const std::pair<Tensor, double>& shift) { return m.forward(x, extra, shift); };
  auto [sum, heads] = dp->forward_with<TwoHeadsImpl>(fn, x, extra, shift);
  auto [want_sum, want_heads] = reference->forward(x, extra, shift);
  EXPECT_EQ(dp->last_stats().replicas, 3);
  EXPECT_LE(max_rel_error(sum, want_sum), 1e-5);
  ASSERT_EQ(heads.size(), 2u);
  Tensor loss = sum.sum() + heads[0].pow(2).sum() + heads[1].sum();
  Tensor want_loss = want_sum.sum() + want_heads[0].pow(2).sum() + want_heads[1].sum();
  for (size_t i = 0; i < 2; ++i) EXPECT_LE(max_rel_error(heads[i], want_heads[i]), 1e-5);
  loss.backward();
  want_loss.backward();
  EXPECT_LE(max_rel_error(loss, want_loss), 1e-5);
  const auto want = reference->named_parameters();
  for (const auto& [name, p] : model->named_parameters())
    EXPECT_LE(max_rel_error(p.grad(), want.at(name).grad()), 1e-5) << name;
}

// Per-replica scalars (a loss computed inside the replica) come back as a
// vector of one value per replica, as PyTorch's gather does.
TEST(DataParallel, ScalarOutputsGatherIntoAVector) {
  manual_seed(9);
  nn::Linear model(3, 2);
  nn::DataParallel dp(model, {kCpu0, kCpu1, kCpu2});
  Tensor x = randn({5, 3});  // chunks 2, 2, 1
  Tensor sums = dp->forward_with<nn::LinearImpl>(
      [](nn::LinearImpl& m, const Tensor& x) { return m.forward(x).sum(); }, x);
  ASSERT_EQ(sums.sizes(), IntList({3}));
  const auto chunks = x.chunk(3, 0);
  for (int64_t k = 0; k < 3; ++k)
    EXPECT_NEAR(sums.to_vector<float>()[k], model->forward(chunks[k]).sum().item<float>(), 1e-5);
}

TEST(DataParallel, OtherDimAndOutputDevice) {
  manual_seed(10);
  nn::Linear model(6, 4);
  auto reference = std::dynamic_pointer_cast<nn::LinearImpl>(model->clone());
  // Split along dim 1 of a (6, N) input, and gather on cpu:2 along dim 1.
  nn::DataParallel dp(model, {kCpu0, kCpu1}, kCpu2, 1);
  Tensor xt = randn({6, 5});
  Tensor out = dp->forward_with<nn::LinearImpl>(
      [](nn::LinearImpl& m, const Tensor& xt) { return m.forward(xt.t()).t(); }, xt);
  EXPECT_EQ(out.device(), kCpu2);
  EXPECT_LE(max_rel_error(out.to(kCpu0), reference->forward(xt.t()).t()), 1e-5);
}

TEST(DataParallel, ParameterOnTheWrongDeviceIsNamed) {
  Net model;
  model->fc1->to(kCpu1);
  nn::DataParallel dp(model, {kCpu0, kCpu1});
  EXPECT_LOOM_ERROR(dp(make_batch(4, 1).x),
                    "DataParallel: module must have its parameters and buffers on device_ids[0] "
                    "(cpu) but parameter \"fc1.weight\" is on cpu:1; move the module there "
                    "first (module->to(cpu))");
  // A buffer alone on the wrong device is named too.
  Net with_bn(true);
  with_bn->bn->register_buffer("running_mean", with_bn->bn->running_mean.to(kCpu2));
  nn::DataParallel dp_bn(with_bn, {kCpu0, kCpu1});
  EXPECT_LOOM_ERROR(dp_bn(make_batch(4, 1).x), "buffer \"bn.running_mean\" is on cpu:2");
}

TEST(DataParallel, ArgumentAndReplicaErrorsAreClear) {
  nn::Linear model(3, 2);
  EXPECT_LOOM_ERROR(nn::DataParallel(std::shared_ptr<nn::Module>()), "DataParallel: the module is null");
  EXPECT_LOOM_ERROR(nn::DataParallel(model, {kCpu0, Device(kCUDA, 0)}),
                    "DataParallel: device_ids [cpu, cuda:0] mix CPU and CUDA devices");
  nn::DataParallel dp(model, {kCpu0, kCpu1});
  auto linear = [](nn::LinearImpl& m, const Tensor& x) { return m.forward(x); };
  auto pair_fn = [](nn::LinearImpl& m, const Tensor& x, const Tensor& y) {
    return m.forward(x) + m.forward(y);
  };
  auto no_tensor = [](nn::LinearImpl& m, int64_t n) { return m.forward(ones({n, 3})); };
  EXPECT_LOOM_ERROR(dp->forward_with<nn::LinearImpl>(no_tensor, int64_t{4}),
                    "DataParallel scatter: the inputs hold no tensor to split along dim 0");
  // 4 rows split 2 + 2, 3 rows 2 + 1: same count, allowed; 4 rows and 1 row: not.
  EXPECT_LOOM_ERROR(dp->forward_with<nn::LinearImpl>(pair_fn, randn({4, 3}), randn({1, 3})),
                    "input tensor 1 [float32 [1, 3] on cpu] splits into 1 chunks along dim 0 but "
                    "input tensor 0 [float32 [4, 3] on cpu] into 2");
  EXPECT_LOOM_ERROR(dp->forward_with<nn::LinearImpl>(linear, randn({})),
                    "DataParallel scatter: input tensor 0", "has no dimension 0 to split along");
  // Only replica 1 fails (its chunk has 3 rows): the message names it.
  auto picky = [](nn::LinearImpl& m, const Tensor& x) {
    LOOM_CHECK(x.size(0) == 4, "picky: got ", x.size(0), " rows");
    return m.forward(x);
  };
  EXPECT_LOOM_ERROR(dp->forward_with<nn::LinearImpl>(picky, randn({7, 3})),
                    "DataParallel: replica 1 on cpu:1: picky: got 3 rows");
  EXPECT_LOOM_ERROR(dp->forward_with<nn::Conv2dImpl>(
                        [](nn::Conv2dImpl& m, const Tensor& x) { return m.forward(x); },
                        randn({4, 3})),
                    "DataParallel::forward_with: the module is a Linear, not the type fn takes");
  // After a failure the next forward works.
  EXPECT_EQ(dp(randn({5, 3})).sizes(), IntList({5, 2}));

  // A module without clone() cannot be replicated.
  struct Plain : nn::Module {
    Plain() : nn::Module("Plain") { w = register_parameter("w", ones({3})); }
    Tensor forward(const Tensor& x) override { return x * w; }
    Tensor w;
  };
  nn::DataParallel plain(std::make_shared<Plain>(), {kCpu0, kCpu1});
  EXPECT_LOOM_ERROR(plain(randn({4, 3})), "DataParallel: cannot replicate Plain onto cpu:1",
                    "does not support clone()");
}

}  // namespace
}  // namespace loom
