// pipeline::Pipe on CPU logical devices: same outputs, loss and gradients as
// the single-device run for every micro-batch split and both schedules;
// stages overlap in time; batch norm per micro-batch; bad input errors.
#include "pipeline/Pipe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "tensor/CudaRuntime.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using pipeline::Checkpoint;
using pipeline::Pipe;
using pipeline::PipeOptions;
using pipeline::Schedule;

const Device kCpu0("cpu");
const Device kCpu1("cpu:1");

// max |a - b| / max |b|: the error measure of the "max relative error".
double max_rel_error(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.sizes(), expected.sizes());
  const auto a = actual.to_vector<double>();
  const auto b = expected.to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / std::max(scale, 1e-30);
}

nn::Sequential small_net() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(2, 3, 3).padding(1)), nn::ReLU(),
                        nn::Flatten(), nn::Linear(3 * 4 * 4, 16), nn::ReLU(),
                        nn::Linear(16, 4));
}

nn::Sequential clone_of(const nn::Sequential& net) {
  return nn::Sequential(std::dynamic_pointer_cast<nn::SequentialImpl>(net->clone()));
}

struct Split {
  int64_t chunks;
  int64_t split_size;  // 0: use chunks
};

class PipeEquivalence
    : public ::testing::TestWithParam<std::tuple<Split, Schedule, Checkpoint>> {};

TEST_P(PipeEquivalence, OutputLossAndGradientsEqualSingleDevice) {
  const Split split = std::get<0>(GetParam());
  const Schedule schedule = std::get<1>(GetParam());
  const Checkpoint checkpoint = std::get<2>(GetParam());
  Generator gen(7);
  const Tensor input = randn({7, 2, 4, 4}, {}, &gen);
  const Tensor target = randn({7, 4}, {}, &gen);

  nn::Sequential net = small_net();
  nn::Sequential ref = clone_of(net);
  Tensor ref_out = ref->forward(input);
  Tensor ref_loss = mse_loss(ref_out, target);
  ref_loss.backward();

  PipeOptions options({kCpu0, kCpu1});
  options.schedule(schedule).checkpoint(checkpoint).balance({3, 3});
  if (split.split_size > 0)
    options.split_size(split.split_size);
  else
    options.chunks(split.chunks);
  Pipe pipe(net, options);
  EXPECT_EQ(net[0]->parameters()[0].device(), kCpu0);
  EXPECT_EQ(net[5]->parameters()[0].device(), kCpu1);

  Tensor out = pipe->forward(input);
  EXPECT_EQ(out.device(), kCpu1);
  EXPECT_LE(max_rel_error(out.to(kCpu0), ref_out), 1e-5);

  Tensor loss = pipe->train_step(input, target, [](const Tensor& o, const Tensor& t) {
    return mse_loss(o, t);
  });
  EXPECT_EQ(loss.device(), kCpu1);
  EXPECT_FALSE(loss.requires_grad());
  EXPECT_LE(max_rel_error(loss.to(kCpu0), ref_loss), 1e-5);

  const auto params = net->parameters();
  const auto ref_params = ref->parameters();
  ASSERT_EQ(params.size(), ref_params.size());
  ASSERT_EQ(pipe->parameters().size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << "parameter " << i;
    EXPECT_EQ(params[i].grad().device(), params[i].device());
    EXPECT_LE(max_rel_error(params[i].grad().to(kCpu0), ref_params[i].grad()), 1e-5)
        << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Splits, PipeEquivalence,
    ::testing::Combine(::testing::Values(Split{1, 0}, Split{2, 0}, Split{3, 0}, Split{0, 1},
                                         Split{0, 3}, Split{0, 20}),
                       ::testing::Values(Schedule::kGPipe, Schedule::kOneFOneB),
                       ::testing::Values(Checkpoint::kNever, Checkpoint::kExceptLast,
                                         Checkpoint::kAlways)));

// Deferred weight gradients (the default) change when weight gradients are
// computed, not what they are.
TEST(Pipe, DeferredWeightGradientsEqualUndeferredOnes) {
  Generator gen(11);
  const Tensor input = randn({9, 2, 4, 4}, {}, &gen);
  const Tensor target = randn({9, 4}, {}, &gen);
  nn::Sequential deferred_net = small_net();
  nn::Sequential plain_net = clone_of(deferred_net);
  Pipe deferred(deferred_net, PipeOptions({kCpu0, kCpu1}).balance({4, 2}).chunks(3));
  Pipe plain(plain_net,
             PipeOptions({kCpu0, kCpu1}).balance({4, 2}).chunks(3).defer_weight_gradients(false));
  EXPECT_TRUE(deferred->options().defer_weight_gradients_);
  auto loss = [](const Tensor& o, const Tensor& t) { return mse_loss(o, t); };
  deferred->train_step(input, target, loss);
  plain->train_step(input, target, loss);
  const auto a = deferred_net->parameters(), b = plain_net->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(max_rel_error(a[i].grad().to(kCpu0), b[i].grad().to(kCpu0)), 1e-6) << i;
}

TEST(Pipe, SplitsLikeChunkAndSplit) {
  Pipe by_chunks(small_net(), PipeOptions({kCpu0, kCpu1}).chunks(3));
  auto pieces = by_chunks->split(zeros({7, 2}));
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].size(0), 3);
  EXPECT_EQ(pieces[2].size(0), 1);
  Pipe by_size(small_net(), PipeOptions({kCpu0, kCpu1}).split_size(3));
  pieces = by_size->split(zeros({8, 2}));
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[2].size(0), 2);
  EXPECT_EQ(by_size->balance(), (std::vector<int64_t>{3, 3}));
  // Even split: the first stages take the remainder.
  nn::Sequential seven;
  for (int i = 0; i < 7; ++i) seven->push_back(nn::ReLU());
  Pipe three(seven, PipeOptions({kCpu0, kCpu1, Device("cpu:2")}));
  EXPECT_EQ(three->balance(), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(three->num_stages(), 3);
}

TEST(Pipe, ThreeStagesAndGradcheckThroughThePipe) {
  nn::Sequential net(nn::Linear(3, 5), nn::ReLU(), nn::Linear(5, 4), nn::Linear(4, 2));
  net->to(kFloat64);
  Pipe pipe(net, PipeOptions({kCpu0, kCpu1, Device("cpu:2")}).balance({1, 2, 1}).chunks(2));
  Tensor x = testing::random_leaf({5, 3}, 3);
  EXPECT_TRUE(testing::GradOk([&](const std::vector<Tensor>& in) { return pipe->forward(in[0]); },
                              {x}));
}

TEST(Pipe, RepeatedDevicesAndInputOnAnotherDevice) {
  Generator gen(5);
  const Tensor x = randn({5, 2, 4, 4}, {}, &gen);
  nn::Sequential net = small_net();
  nn::Sequential ref = clone_of(net);
  const Tensor expected = ref->forward(x).detach();
  // Both stages on one device (one stream runs both), then on cpu:1 and
  // cpu:2 with the input left on cpu:0: the input's gradient comes back.
  Pipe same(net, PipeOptions({kCpu1, kCpu1}).chunks(2));
  EXPECT_LE(max_rel_error(same->forward(x).to(kCpu0), expected), 1e-5);
  Pipe other(net, PipeOptions({kCpu1, Device("cpu:2")}).split_size(2));
  Tensor leaf = x.detach().requires_grad_();
  Tensor out = other->forward(leaf);
  EXPECT_EQ(out.device(), Device("cpu:2"));
  EXPECT_LE(max_rel_error(out.to(kCpu0), expected), 1e-5);
  out.sum().backward();
  Tensor ref_leaf = x.detach().requires_grad_();
  ref->forward(ref_leaf).sum().backward();
  ASSERT_TRUE(leaf.grad().defined());
  EXPECT_EQ(leaf.grad().device(), kCpu0);
  EXPECT_LE(max_rel_error(leaf.grad(), ref_leaf.grad()), 1e-5);
}

// A layer that sleeps: stands for compute without needing free cores.
class SleepImpl : public nn::Module {
 public:
  explicit SleepImpl(int ms) : nn::Module("Sleep"), ms_(ms) {}
  Tensor forward(const Tensor& x) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return x * 1.0f;
  }

 private:
  int ms_;
};

TEST(Pipe, StagesOverlapInTime) {
  constexpr int kMs = 25;
  constexpr int kChunks = 6;
  nn::Sequential net;
  net->push_back(std::make_shared<SleepImpl>(kMs));
  net->push_back(std::make_shared<SleepImpl>(kMs));
  Pipe pipe(net, PipeOptions({kCpu0, kCpu1}).chunks(kChunks));
  Tensor x = ones({kChunks, 2});
  pipe->forward(x);  // warm the stream threads
  const auto start = std::chrono::steady_clock::now();
  Tensor y = pipe->forward(x);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const double serial = kChunks * 2.0 * kMs;  // ideal pipelined: (kChunks + 1) * kMs
  EXPECT_LT(ms, 0.8 * serial) << "pipelined " << ms << " ms vs serial " << serial << " ms";
  EXPECT_TRUE(testing::AllClose(y.to(kCpu0), x));
}

// Sleeps in forward and, through a hook on its output, in backward.
class SleepBothWaysImpl : public nn::Module {
 public:
  explicit SleepBothWaysImpl(int ms) : nn::Module("SleepBothWays"), ms_(ms) {}
  Tensor forward(const Tensor& x) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    Tensor y = x * 1.0f;
    const int ms = ms_;
    y.register_hook([ms](const Tensor&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return Tensor();
    });
    return y;
  }

 private:
  int ms_;
};

TEST(Pipe, BackwardIsPipelinedToo) {
  constexpr int kMs = 20;
  constexpr int kChunks = 6;
  nn::Sequential net;
  net->push_back(std::make_shared<SleepBothWaysImpl>(kMs));
  net->push_back(std::make_shared<SleepBothWaysImpl>(kMs));
  Pipe pipe(net, PipeOptions({kCpu0, kCpu1}).chunks(kChunks));
  Tensor x = ones({kChunks, 2}).requires_grad_();
  pipe->forward(x).sum().backward();  // warm-up
  x.set_grad(Tensor());
  const auto start = std::chrono::steady_clock::now();
  pipe->forward(x).sum().backward();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const double serial = 2 * kChunks * 2.0 * kMs;  // forward + backward, one stage at a time
  EXPECT_LT(ms, 0.8 * serial) << "pipelined " << ms << " ms vs serial " << serial << " ms";
  EXPECT_TRUE(testing::AllClose(x.grad(), ones({kChunks, 2})));
}

// Counts its outputs whose gradient has not arrived yet: the activations a
// schedule keeps alive.
struct LiveCounter {
  std::mutex mutex;
  int live = 0;
  int peak = 0;
};
class CountLiveImpl : public nn::Module {
 public:
  explicit CountLiveImpl(std::shared_ptr<LiveCounter> c) : nn::Module("CountLive"), c_(c) {}
  Tensor forward(const Tensor& x) override {
    Tensor y = x * 1.0f;
    {
      std::lock_guard<std::mutex> lock(c_->mutex);
      c_->peak = std::max(c_->peak, ++c_->live);
    }
    auto c = c_;
    y.register_hook([c](const Tensor&) {
      std::lock_guard<std::mutex> lock(c->mutex);
      --c->live;
      return Tensor();
    });
    return y;
  }

 private:
  std::shared_ptr<LiveCounter> c_;
};

TEST(Pipe, OneFOneBBoundsLiveMicroBatchesByTheStageCount) {
  constexpr int kChunks = 6;
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB}) {
    auto counter = std::make_shared<LiveCounter>();
    nn::Sequential net;
    net->push_back(std::make_shared<CountLiveImpl>(counter));
    net->push_back(nn::Linear(2, 3).ptr());
    net->push_back(nn::Linear(3, 2).ptr());
    Pipe pipe(net, PipeOptions({kCpu0, kCpu1}).chunks(kChunks).schedule(schedule));
    Tensor x = ones({kChunks, 2}).requires_grad_();
    pipe->train_step(x, zeros({kChunks, 2}),
                     [](const Tensor& o, const Tensor& t) { return mse_loss(o, t); });
    EXPECT_EQ(counter->live, 0);
    if (schedule == Schedule::kGPipe)
      EXPECT_EQ(counter->peak, kChunks) << "fill-drain holds every micro-batch";
    else
      EXPECT_LE(counter->peak, 2) << "1F1B holds at most stages (2) micro-batches";
  }
}

TEST(Pipe, BatchNormUsesPerMicroBatchStatistics) {
  nn::Sequential net(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::ReLU(), nn::Linear(4, 2));
  nn::Sequential ref = clone_of(net);
  Pipe pipe(net, PipeOptions({kCpu0, kCpu1}).balance({2, 2}).split_size(4));
  Generator gen(3);
  Tensor x = randn({10, 3}, {}, &gen);
  Tensor out = pipe->forward(x);
  std::vector<Tensor> expected;
  for (const Tensor& piece : x.split(4, 0)) expected.push_back(ref->forward(piece));
  EXPECT_LE(max_rel_error(out.to(kCpu0), cat(expected, 0)), 1e-5);
  // Running statistics were updated once per micro-batch, like the reference.
  auto bn = net->at<nn::BatchNorm1dImpl>(1);
  auto ref_bn = ref->at<nn::BatchNorm1dImpl>(1);
  EXPECT_LE(max_rel_error(bn->running_mean, ref_bn->running_mean), 1e-5);
  EXPECT_LE(max_rel_error(bn->running_var, ref_bn->running_var), 1e-5);
}

TEST(Pipe, DeferredBatchNormTracksWholeBatchStatistics) {
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB}) {
    nn::Sequential net(nn::Conv2d(2, 3, 3), nn::BatchNorm2d(3), nn::ReLU(), nn::Flatten(),
                       nn::Linear(3 * 2 * 2, 4), nn::BatchNorm1d(4),
                       nn::BatchNorm1d(nn::BatchNormOptions(4).momentum(std::nullopt)));
    nn::Sequential ref = clone_of(net);
    nn::Sequential per_micro = clone_of(net);
    PipeOptions options({kCpu0, kCpu1});
    options.balance({3, 4}).chunks(3).schedule(schedule).deferred_batch_norm(true);
    Pipe pipe(net, options);
    Generator gen(9);
    // What the pipe's batch norms see: layer 1 the convolution of the whole
    // batch; layers 5 and 6 the outputs of per-micro-batch normalisation.
    auto whole_batch_update = [&](const Tensor& x) {
      ref[1]->forward(ref[0]->forward(x));
      for (int64_t layer : {5, 6}) {
        std::vector<Tensor> seen;
        for (const Tensor& piece : x.chunk(3, 0))
          seen.push_back(per_micro->slice(0, layer)->forward(piece));
        ref[layer]->forward(cat(seen, 0));
      }
    };
    for (int step = 0; step < 2; ++step) {
      Tensor x = randn({10, 2, 4, 4}, {}, &gen);
      Tensor target = randn({10, 4}, {}, &gen);
      // The outputs (and so the gradients) are those of per-micro-batch
      // batch norm...
      std::vector<Tensor> expected;
      for (const Tensor& piece : x.chunk(3, 0)) expected.push_back(per_micro->forward(piece));
      Tensor out = pipe->forward(x);
      EXPECT_LE(max_rel_error(out.to(kCpu0), cat(expected, 0).detach()), 1e-5);
      // ...while the running statistics follow the whole batch, updated once
      // per pass (forward and train_step: two passes a step).
      whole_batch_update(x);
      pipe->train_step(x, target, [](const Tensor& o, const Tensor& t) { return mse_loss(o, t); });
      whole_batch_update(x);
    }
    for (int64_t layer : {1, 5, 6}) {
      auto bn = std::dynamic_pointer_cast<nn::BatchNormBase>(net[layer]);
      auto ref_bn = std::dynamic_pointer_cast<nn::BatchNormBase>(ref[layer]);
      EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 4) << "layer " << layer;
      EXPECT_LE(max_rel_error(bn->running_mean.to(kCpu0), ref_bn->running_mean), 1e-5)
          << "layer " << layer;
      EXPECT_LE(max_rel_error(bn->running_var.to(kCpu0), ref_bn->running_var), 1e-5)
          << "layer " << layer;
    }
    // Eval mode uses the running statistics: the pipe now equals the
    // reference (its convolution and linear layers are the same).
    pipe->eval();
    ref->eval();
    Tensor x = randn({5, 2, 4, 4}, {}, &gen);
    EXPECT_LE(max_rel_error(pipe->forward(x).to(kCpu0), ref->forward(x)), 1e-5);
  }
  // The redirection ends with the pipe; a second deferred pipe over the same
  // layers while the first lives is an error.
  nn::Sequential net(nn::Linear(2, 3), nn::BatchNorm1d(3));
  {
    Pipe first(net, PipeOptions({kCpu0, kCpu1}).deferred_batch_norm(true));
    EXPECT_NE(net->at<nn::BatchNorm1dImpl>(1)->forward_to, nullptr);
    EXPECT_LOOM_ERROR(Pipe(net, PipeOptions({kCpu0, kCpu1}).deferred_batch_norm(true)),
                      "already forwards to");
  }
  EXPECT_EQ(net->at<nn::BatchNorm1dImpl>(1)->forward_to, nullptr);
}

TEST(Pipe, NoGradForwardRecordsNoHistory) {
  Pipe pipe(small_net(), PipeOptions({kCpu0, kCpu1}).chunks(2));
  NoGradGuard no_grad;
  Tensor y = pipe->forward(randn({4, 2, 4, 4}));
  EXPECT_FALSE(y.requires_grad());
  EXPECT_LOOM_ERROR(pipe->train_step(randn({4, 2, 4, 4}), randn({4, 4}),
                                     [](const Tensor& o, const Tensor& t) { return mse_loss(o, t); }),
                    "grad mode");
}

// Returns its input moved to a fixed device: the wrong device on stage 1.
class MoveToImpl : public nn::Module {
 public:
  explicit MoveToImpl(Device d) : nn::Module("MoveTo"), device_(d) {}
  Tensor forward(const Tensor& x) override { return x.to(device_); }

 private:
  Device device_;
};

class FailImpl : public nn::Module {
 public:
  FailImpl() : nn::Module("Fail") {}
  Tensor forward(const Tensor&) override { throw Error("layer failed on purpose"); }
};

TEST(Pipe, StageReturningTheWrongDeviceIsAnError) {
  nn::Sequential net(nn::Linear(2, 2));
  net->push_back(std::make_shared<MoveToImpl>(kCpu0));
  Pipe pipe(net, PipeOptions({kCpu0, kCpu1}).chunks(2));
  EXPECT_LOOM_ERROR(pipe->forward(ones({4, 2})), "stage 1", "placed on cpu:1",
                    "returned a tensor on cpu", "micro-batch 0");
  // The streams recovered: a good pipe on the same devices works.
  Pipe good(nn::Sequential(nn::Linear(2, 2), nn::Linear(2, 2)), PipeOptions({kCpu0, kCpu1}));
  EXPECT_EQ(good->forward(ones({4, 2})).device(), kCpu1);
}

TEST(Pipe, ErrorInAStageReachesTheCaller) {
  nn::Sequential net;
  net->push_back(std::make_shared<FailImpl>());
  net->push_back(nn::Linear(2, 2).ptr());
  Pipe pipe(net, PipeOptions({kCpu0, kCpu1}).chunks(3));
  EXPECT_LOOM_ERROR(pipe->forward(ones({6, 2})), "layer failed on purpose", "stage 0",
                    "cpu default stream");
  PipeOptions one_f_one_b({kCpu0, kCpu1});
  one_f_one_b.chunks(3).schedule(Schedule::kOneFOneB);
  Pipe pipe2(net, one_f_one_b);
  EXPECT_LOOM_ERROR(pipe2->train_step(ones({6, 2}), ones({6, 2}),
                                      [](const Tensor& o, const Tensor& t) { return mse_loss(o, t); }),
                    "layer failed on purpose");
  Pipe good(nn::Sequential(nn::Linear(2, 2), nn::Linear(2, 2)), PipeOptions({kCpu0, kCpu1}));
  EXPECT_EQ(good->forward(ones({4, 2})).device(), kCpu1);
}

// Records, per forward call of a layer, whether it built a graph and whether
// it was a checkpoint's recomputation.
struct ForwardLog {
  std::mutex mutex;
  int recording = 0, without_graph = 0, recomputing = 0;
};
class LogForwardImpl : public nn::Module {
 public:
  explicit LogForwardImpl(std::shared_ptr<ForwardLog> log)
      : nn::Module("LogForward"), log_(std::move(log)) {}
  Tensor forward(const Tensor& x) override {
    std::lock_guard<std::mutex> lock(log_->mutex);
    if (autograd::is_recomputing()) ++log_->recomputing;
    else if (autograd::GradMode::is_enabled()) ++log_->recording;
    else ++log_->without_graph;
    return x * 2.0f;
  }

 private:
  std::shared_ptr<ForwardLog> log_;
};

TEST(Pipe, CheckpointModesRecomputeTheRightMicroBatches) {
  constexpr int kChunks = 4;
  struct Case {
    Checkpoint mode;
    int recording, without_graph, recomputing;  // per layer, over kChunks micro-batches
  };
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB}) {
    for (const Case& c : {Case{Checkpoint::kNever, kChunks, 0, 0},
                          Case{Checkpoint::kExceptLast, 1, kChunks - 1, kChunks - 1},
                          Case{Checkpoint::kAlways, 0, kChunks, kChunks}}) {
      auto first = std::make_shared<ForwardLog>(), second = std::make_shared<ForwardLog>();
      nn::Sequential net;
      net->push_back(nn::Linear(2, 2).ptr());
      net->push_back(std::make_shared<LogForwardImpl>(first));
      net->push_back(std::make_shared<LogForwardImpl>(second));
      Pipe pipe(net, PipeOptions({kCpu0, kCpu1}).chunks(kChunks).schedule(schedule).checkpoint(c.mode));
      pipe->train_step(ones({kChunks, 2}), zeros({kChunks, 2}),
                       [](const Tensor& o, const Tensor& t) { return mse_loss(o, t); });
      for (const auto& log : {first, second}) {
        EXPECT_EQ(log->recording, c.recording) << "mode " << static_cast<int>(c.mode);
        EXPECT_EQ(log->without_graph, c.without_graph) << "mode " << static_cast<int>(c.mode);
        EXPECT_EQ(log->recomputing, c.recomputing) << "mode " << static_cast<int>(c.mode);
      }
    }
  }
}

TEST(Pipe, CheckpointedBatchNormKeepsRunningStatisticsAndGradients) {
  for (bool deferred : {false, true}) {
    nn::Sequential net(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::ReLU(), nn::Linear(4, 2));
    nn::Sequential ref = clone_of(net);
    Pipe plain(ref, PipeOptions({kCpu0, kCpu1}).balance({2, 2}).split_size(4)
                        .deferred_batch_norm(deferred));
    Pipe pipe(net, PipeOptions({kCpu0, kCpu1}).balance({2, 2}).split_size(4)
                       .deferred_batch_norm(deferred).checkpoint(Checkpoint::kAlways));
    Generator gen(3);
    Tensor x = randn({10, 3}, {}, &gen);
    Tensor t = randn({10, 2}, {}, &gen);
    auto loss = [](const Tensor& o, const Tensor& target) { return mse_loss(o, target); };
    EXPECT_LE(max_rel_error(pipe->train_step(x, t, loss), plain->train_step(x, t, loss)), 1e-6);
    auto bn = net->at<nn::BatchNorm1dImpl>(1);
    auto ref_bn = ref->at<nn::BatchNorm1dImpl>(1);
    EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), ref_bn->num_batches_tracked.item<int64_t>());
    EXPECT_LE(max_rel_error(bn->running_mean, ref_bn->running_mean), 1e-6);
    EXPECT_LE(max_rel_error(bn->running_var, ref_bn->running_var), 1e-6);
    const auto params = net->parameters(), ref_params = ref->parameters();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_LE(max_rel_error(params[i].grad().to(kCpu0), ref_params[i].grad().to(kCpu0)), 1e-5)
          << "parameter " << i << (deferred ? " (deferred)" : "");
  }
}

TEST(Pipe, BadOptionsAreClearErrors) {
  auto net = [] { return nn::Sequential(nn::Linear(2, 2), nn::ReLU(), nn::Linear(2, 2)); };
  EXPECT_LOOM_ERROR(Pipe(net(), PipeOptions({kCpu0, kCpu1}).balance({1, 1})), "balance [1, 1]",
                    "sums to 2", "3 layers");
  EXPECT_LOOM_ERROR(Pipe(net(), PipeOptions({kCpu0, kCpu1}).balance({3})), "1 stages",
                    "2 devices");
  EXPECT_LOOM_ERROR(Pipe(net(), PipeOptions({kCpu0, kCpu1}).balance({3, 0})), "balance[1] = 0");
  EXPECT_LOOM_ERROR(
      Pipe(net(), PipeOptions({kCpu0, kCpu1, Device("cpu:2"), Device("cpu:3")})),
      "more devices (4", "than layers (3)");
  EXPECT_LOOM_ERROR(Pipe(net(), PipeOptions()), "at least one device");
  EXPECT_LOOM_ERROR(Pipe(net(), PipeOptions({kCpu0}).chunks(0)), "chunks must be >= 1, got 0");
  EXPECT_LOOM_ERROR(Pipe(net(), PipeOptions({kCpu0}).split_size(0)),
                    "split_size must be >= 1, got 0");
  EXPECT_LOOM_ERROR(Pipe(net(), PipeOptions({kCpu0}).split_size(-2)),
                    "split_size must be >= 1, got -2");
  EXPECT_LOOM_ERROR(Pipe(net(), PipeOptions({kCpu0}).split_size(2).chunks(2)), "not both");
  // A GPU that cannot be used (none visible, built without CUDA, or an index
  // past the last one) is named.
  EXPECT_LOOM_ERROR(Pipe(net(), PipeOptions({Device(kCUDA, cuda::device_count())})), "Pipe",
                    "CUDA device");
  EXPECT_LOOM_ERROR(Pipe(nn::Sequential(), PipeOptions({kCpu0})), "no layers");

  Pipe pipe(net(), PipeOptions({kCpu0, kCpu1}));
  EXPECT_LOOM_ERROR(pipe->to(kCpu1), "cannot move a pipe");
  EXPECT_LOOM_ERROR(pipe->forward(Tensor()), "undefined");
  EXPECT_LOOM_ERROR(pipe->forward(ones({})), "batch dimension");
  EXPECT_LOOM_ERROR(
      pipe->train_step(ones({4, 2}), ones({3, 2}),
                       [](const Tensor& o, const Tensor& t) { return mse_loss(o, t); }),
      "4 rows");
  EXPECT_LOOM_ERROR(pipe->train_step(ones({4, 2}), ones({4, 2}), nullptr), "loss_fn");
}

}  // namespace
}  // namespace loom
