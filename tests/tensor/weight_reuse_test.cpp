// Weight reuse (tensor/WeightReuse.h): the mode and how streams carry it,
// and -- with oneDNN pinned (LOOM_CPU_CONV=onednn, direct kernels, blocked
// layouts for channels last; the test re-runs itself so) -- that
// convolutions reuse their reordered weights, backward too, give the same
// results as without, and read weights written in place anew.
#include <cstdlib>
#include <string>

#include "pipeline/Pipe.h"
#include "tensor/Stream.h"
#include "tensor/WeightReuse.h"
#include "tensor/cpu/OneDnnConvolution.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

const Device kCpu0("cpu:0"), kCpu1("cpu:1");

TEST(WeightReuse, OffByDefaultAndScopedByTheGuard) {
  EXPECT_FALSE(WeightReuse::is_enabled());
  {
    WeightReuseGuard on;
    EXPECT_TRUE(WeightReuse::is_enabled());
    {
      WeightReuseGuard off(false);
      EXPECT_FALSE(WeightReuse::is_enabled());
    }
    EXPECT_TRUE(WeightReuse::is_enabled());
  }
  EXPECT_FALSE(WeightReuse::is_enabled());
}

TEST(WeightReuse, StreamClosuresRunInTheSubmittersMode) {
  const Stream stream = Stream::default_stream(kCpu1);
  bool seen_on = false, seen_off = true;
  {
    WeightReuseGuard on;
    stream.submit([&] { seen_on = WeightReuse::is_enabled(); });
  }
  stream.submit([&] { seen_off = WeightReuse::is_enabled(); });
  stream.synchronize();
  EXPECT_TRUE(seen_on);
  EXPECT_FALSE(seen_off);
}

// The cases below need oneDNN's kernels (which reorder weights) on every
// convolution: they run in the child that PinnedToOneDnn starts.
bool pinned_to_onednn() {
  const char* backend = std::getenv("LOOM_CPU_CONV");
  const char* algorithm = std::getenv("LOOM_ONEDNN_ALGORITHM");
  const char* layout = std::getenv("LOOM_ONEDNN_LAYOUT");
  return backend != nullptr && std::string(backend) == "onednn" && algorithm != nullptr &&
         std::string(algorithm) == "direct" && layout != nullptr &&
         std::string(layout) == "blocked";
}

#define SKIP_UNLESS_PINNED()                                                          \
  do {                                                                                \
    if (!pinned_to_onednn()) GTEST_SKIP() << "runs in PinnedToOneDnn's child process"; \
  } while (0)

TEST(WeightReuse, PinnedToOneDnn) {
  for (const char* setting : {"LOOM_CPU_CONV", "LOOM_ONEDNN_ALGORITHM", "LOOM_ONEDNN_LAYOUT"})
    if (std::getenv(setting) != nullptr)
      GTEST_SKIP() << "convolution settings given by the environment";
  EXPECT_EQ(testing::run_with_env("/proc/self/exe",
                                  {{"LOOM_CPU_CONV", "onednn"},
                                   {"LOOM_ONEDNN_ALGORITHM", "direct"},
                                   {"LOOM_ONEDNN_LAYOUT", "blocked"}},
                                  "--gtest_filter=WeightReuseOneDnn.*"),
            0);
}

// A 3x3 convolution large enough for oneDNN's blocked kernels.
struct Case {
  Tensor x1, x2, w, b;
};
Case make_case(MemoryFormat format = MemoryFormat::kContiguous) {
  Generator gen(5);
  Case c{randn({4, 32, 8, 8}, {}, &gen), randn({4, 32, 8, 8}, {}, &gen),
         randn({64, 32, 3, 3}, {}, &gen), randn({64}, {}, &gen)};
  c.x1 = c.x1.contiguous(format);
  c.x2 = c.x2.contiguous(format);
  return c;
}

Tensor conv(const Tensor& x, const Tensor& w, const Tensor& b) {
  return conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 1);
}

TEST(WeightReuseOneDnn, ForwardReusesTheReorderedWeights) {
  SKIP_UNLESS_PINNED();
  for (MemoryFormat format : {MemoryFormat::kContiguous, MemoryFormat::kChannelsLast}) {
    SCOPED_TRACE(format == MemoryFormat::kContiguous ? "NCHW" : "channels last");
    const Case c = make_case(format);
    const Tensor plain1 = conv(c.x1, c.w, c.b), plain2 = conv(c.x2, c.w, c.b);
    const WeightReuseStats before = weight_reuse_stats();
    Tensor reused1, reused2;
    {
      WeightReuseGuard reuse;
      reused1 = conv(c.x1, c.w, c.b);
      reused2 = conv(c.x2, c.w, c.b);
    }
    const WeightReuseStats after = weight_reuse_stats();
    EXPECT_EQ(after.made - before.made, 1);
    EXPECT_EQ(after.reused - before.reused, 1);
    ASSERT_EQ(reused1.sizes(), plain1.sizes());
    EXPECT_TRUE(equal(reused1, plain1));
    EXPECT_TRUE(equal(reused2, plain2));
  }
}

TEST(WeightReuseOneDnn, WeightsWrittenInPlaceAreReorderedAgain) {
  SKIP_UNLESS_PINNED();
  Case c = make_case();
  WeightReuseGuard reuse;
  const Tensor before = conv(c.x1, c.w, c.b);
  c.w.mul_(2.0);  // bumps the version
  const WeightReuseStats stats = weight_reuse_stats();
  const Tensor after = conv(c.x1, c.w, c.b);
  EXPECT_EQ(weight_reuse_stats().reused, stats.reused);  // the stale copy is not read
  EXPECT_EQ(weight_reuse_stats().made, stats.made + 1);
  WeightReuseGuard off(false);
  EXPECT_TRUE(equal(after, conv(c.x1, c.w, c.b)));
  EXPECT_FALSE(equal(after, before));
}

// The backward keeps the mode its forward was recorded under: the input
// gradient's pass reuses the weights the first micro-batch reordered, even
// when backward runs outside the guard.
TEST(WeightReuseOneDnn, BackwardKeepsTheModeOfItsForward) {
  SKIP_UNLESS_PINNED();
  const Case c = make_case();
  auto grads = [&](bool reuse) {
    const Tensor w = c.w.detach().requires_grad_();
    const Tensor x1 = c.x1.detach().requires_grad_(), x2 = c.x2.detach().requires_grad_();
    Tensor loss;
    {
      WeightReuseGuard guard(reuse);
      loss = conv(x1, w, c.b).pow(2).sum() + conv(x2, w, c.b).sum();
    }
    loss.backward();
    return std::vector<Tensor>{x1.grad(), x2.grad(), w.grad()};
  };
  const std::vector<Tensor> plain = grads(false);
  const WeightReuseStats before = weight_reuse_stats();
  const std::vector<Tensor> reused = grads(true);
  const WeightReuseStats after = weight_reuse_stats();
  // Two forwards and two input gradients; the forward layout and the input
  // gradient's are made once each.
  EXPECT_EQ(after.made - before.made + after.reused - before.reused, 4);
  EXPECT_GE(after.reused - before.reused, 2);
  for (size_t i = 0; i < plain.size(); ++i) {
    ASSERT_EQ(reused[i].sizes(), plain[i].sizes()) << i;
    EXPECT_TRUE(equal(reused[i], plain[i])) << i;
  }
}

// prepare_kept_weights reorders changed weights ahead of the pass that
// reads them, for the layouts passes read, on the weights' device only.
TEST(WeightReuseOneDnn, PrepareReordersChangedWeightsAhead) {
  SKIP_UNLESS_PINNED();
  Case c = make_case();
  WeightReuseGuard reuse;
  conv(c.x1, c.w, c.b);
  EXPECT_EQ(prepare_kept_weights(kCpu0), 0);  // unchanged
  c.w.mul_(2.0);
  EXPECT_EQ(prepare_kept_weights(kCpu1), 0);  // not that device's weights
  const WeightReuseStats before = weight_reuse_stats();
  EXPECT_EQ(prepare_kept_weights(kCpu0), 1);
  const Tensor prepared = conv(c.x1, c.w, c.b);
  EXPECT_EQ(weight_reuse_stats().made - before.made, 1);
  EXPECT_EQ(weight_reuse_stats().reused - before.reused, 1);
  WeightReuseGuard off(false);
  EXPECT_TRUE(equal(prepared, conv(c.x1, c.w, c.b)));
}

// A pipe (reuse on by default) trains as one without reuse: two steps with an
// optimizer step between them, so the second reads the updated weights.
TEST(WeightReuseOneDnn, PipeStepsEqualStepsWithoutReuse) {
  SKIP_UNLESS_PINNED();
  Generator gen(7);
  const Tensor input = randn({8, 16, 8, 8}, {}, &gen), target = randn({8, 32, 8, 8}, {}, &gen);
  auto net = [] {
    manual_seed(3);
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)), nn::ReLU(),
                          nn::Conv2d(nn::Conv2dOptions(32, 32, 3).padding(1)));
  };
  nn::Sequential reusing = net(), plain = net();
  pipeline::Pipe a(reusing, pipeline::PipeOptions({kCpu0, kCpu1}).chunks(4));
  pipeline::Pipe b(plain, pipeline::PipeOptions({kCpu0, kCpu1}).chunks(4).reuse_weights(false));
  EXPECT_TRUE(a->options().reuse_weights_);
  optim::SGD sa(reusing->parameters(), optim::SGDOptions(0.1));
  optim::SGD sb(plain->parameters(), optim::SGDOptions(0.1));
  auto loss = [](const Tensor& o, const Tensor& t) { return mse_loss(o, t); };
  const WeightReuseStats before = weight_reuse_stats();
  for (int step = 0; step < 2; ++step) {
    sa.zero_grad();
    sb.zero_grad();
    const Tensor la = a->train_step(input, target, loss), lb = b->train_step(input, target, loss);
    EXPECT_TRUE(equal(la.to(kCpu0), lb.to(kCpu0))) << "step " << step;
    const auto pa = reusing->parameters(), pb = plain->parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i)
      EXPECT_TRUE(equal(pa[i].grad().to(kCpu0), pb[i].grad().to(kCpu0)))
          << "step " << step << ", parameter " << i;
    sa.step();
    sb.step();
  }
  EXPECT_GT(weight_reuse_stats().reused, before.reused);
}

}  // namespace
}  // namespace loom
