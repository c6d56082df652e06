// Deferred weight gradients (autograd/DeferWeightGrad.h): conv2d and linear
// recorded under DeferWeightGradGuard give the same gradients; their weight
// halves run only when nothing else of their device is ready, and ready
// halves of one layer run as one product (the engine's ReadyQueue).  Also
// the engine's in-place accumulation of a node's incoming gradients.
#include "autograd/DeferWeightGrad.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "autograd/Engine.h"
#include "autograd/Node.h"
#include "autograd/functions/Record.h"
#include "tensor/Stream.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using autograd::DeferWeightGrad;
using autograd::DeferWeightGradGuard;
using testing::AllClose;

struct Net {
  Tensor w1, b1, w2, b2, w3, b3;  // conv 3->4, conv 4->5 (stride 2), linear 5*3*3 -> 6
};

Net make_net(uint64_t seed) {
  Generator gen(seed);
  Net n;
  n.w1 = randn({4, 3, 3, 3}, kFloat64, &gen).requires_grad_();
  n.b1 = randn({4}, kFloat64, &gen).requires_grad_();
  n.w2 = randn({5, 4, 3, 3}, kFloat64, &gen).requires_grad_();
  n.b2 = randn({5}, kFloat64, &gen).requires_grad_();
  n.w3 = randn({6, 45}, kFloat64, &gen).requires_grad_();
  n.b3 = randn({6}, kFloat64, &gen).requires_grad_();
  return n;
}

Tensor run_net(const Net& n, const Tensor& x) {
  Tensor h = conv2d(x, n.w1, n.b1, {1, 1}, {1, 1}).relu();
  h = conv2d(h, n.w2, n.b2, {2, 2}, {1, 1}).relu();
  return linear(h.flatten(1), n.w3, n.b3);
}

// The net applied to micro-batches of `split` rows, concatenated: several
// weight halves per layer, coalesced by the engine when deferred.
Tensor run_split(const Net& n, const Tensor& x, int64_t split) {
  std::vector<Tensor> outs;
  for (const Tensor& part : x.split(split, 0)) outs.push_back(run_net(n, part));
  return cat(outs, 0);
}

std::vector<Tensor> params(const Net& n) { return {n.w1, n.b1, n.w2, n.b2, n.w3, n.b3}; }

TEST(DeferWeightGrad, OffByDefaultAndScoped) {
  EXPECT_FALSE(DeferWeightGrad::is_enabled());
  {
    DeferWeightGradGuard defer;
    EXPECT_TRUE(DeferWeightGrad::is_enabled());
    {
      DeferWeightGradGuard off(false);
      EXPECT_FALSE(DeferWeightGrad::is_enabled());
    }
    EXPECT_TRUE(DeferWeightGrad::is_enabled());
  }
  EXPECT_FALSE(DeferWeightGrad::is_enabled());
}

TEST(DeferWeightGrad, ConvAndLinearRecordAnInputAndADeferredWeightHalf) {
  const Net n = make_net(1);
  const Tensor x = randn({2, 3, 5, 5}, kFloat64).requires_grad_();
  DeferWeightGradGuard defer;
  const Tensor y = conv2d(x, n.w1, n.b1, {1, 1}, {1, 1});
  auto node = y.grad_fn();
  ASSERT_EQ(node->next_edges().size(), 4u);  // input, (weight), (bias), twin
  EXPECT_TRUE(node->next_edges()[0].is_valid());
  EXPECT_FALSE(node->next_edges()[1].is_valid());
  EXPECT_FALSE(node->next_edges()[2].is_valid());
  EXPECT_FALSE(node->is_deferred());
  const auto& twin = node->next_edges()[3].node;
  EXPECT_TRUE(twin->is_deferred());
  EXPECT_EQ(twin->name(), "Conv2dWeightBackward");
  EXPECT_FALSE(twin->next_edges()[0].is_valid());
  EXPECT_TRUE(twin->next_edges()[1].is_valid());
  EXPECT_TRUE(twin->next_edges()[2].is_valid());

  const Tensor z = linear(y.flatten(1), randn({3, 100}, kFloat64).requires_grad_());
  ASSERT_EQ(z.grad_fn()->next_edges().size(), 4u);
  EXPECT_EQ(z.grad_fn()->next_edges()[3].node->name(), "LinearWeightBackward");

  // Nothing to split: the input needs no gradient, or no weight does.
  const Tensor first = conv2d(x.detach(), n.w1, n.b1);
  EXPECT_EQ(first.grad_fn()->next_edges().size(), 3u);
  const Tensor frozen = conv2d(x, n.w1.detach());
  EXPECT_EQ(frozen.grad_fn()->next_edges().size(), 3u);
}

TEST(DeferWeightGrad, StreamClosuresRecordAsTheirSubmitter) {
  const Net n = make_net(2);
  const Tensor x = randn({1, 3, 4, 4}, kFloat64).requires_grad_();
  const Stream stream = Stream::default_stream(Device(kCPU, 1));
  size_t with = 0, without = 0;
  {
    DeferWeightGradGuard defer;
    stream.submit([&] { with = conv2d(x, n.w1).grad_fn()->next_edges().size(); });
  }
  stream.submit([&] { without = conv2d(x, n.w1).grad_fn()->next_edges().size(); });
  stream.synchronize();
  EXPECT_EQ(with, 4u);
  EXPECT_EQ(without, 3u);
}

// A conv layer's weight halves of two micro-batches stack into one product
// only for filters larger than 1x1 while a micro-batch's product is short
// (fewer than 1024 output pixels): otherwise each is as fast alone, and
// stacking would only copy.
TEST(DeferWeightGrad, ConvWeightHalvesCoalesceWhereStackingCostsLess) {
  const Tensor w = randn({4, 3, 3, 3}).requires_grad_();
  const Tensor pointwise = randn({4, 3, 1, 1}).requires_grad_();
  DeferWeightGradGuard defer;
  auto twin_of = [&](Tensor x, int64_t stride) {
    return conv2d(x.requires_grad_(), w, Tensor(), {stride, stride}, {1, 1})
        .grad_fn()->next_edges()[3].node;
  };
  auto pointwise_twin = [&](Tensor x) {
    return conv2d(x.requires_grad_(), pointwise).grad_fn()->next_edges()[3].node;
  };
  // 1x1 filters: where a micro-batch's input and output outweigh the weight
  // (192 + 64 elements against 12), no; where the weight is the larger (an
  // image of 64 x 2x2: 256 + 32 elements against 8 x 64), yes; two such
  // images (576), no.
  EXPECT_FALSE(
      pointwise_twin(randn({4, 3, 4, 4}))->coalesces_with(*pointwise_twin(randn({4, 3, 4, 4}))));
  const Tensor wide = randn({8, 64, 1, 1}).requires_grad_();
  auto wide_twin = [&](Tensor x) {
    return conv2d(x.requires_grad_(), wide).grad_fn()->next_edges()[3].node;
  };
  EXPECT_TRUE(wide_twin(randn({1, 64, 2, 2}))->coalesces_with(*wide_twin(randn({1, 64, 2, 2}))));
  EXPECT_FALSE(wide_twin(randn({2, 64, 2, 2}))->coalesces_with(*wide_twin(randn({1, 64, 2, 2}))));
  // 4 images of 8x8 (256 output pixels) with 4 of 8x8, and with 2 of 8x8.
  EXPECT_TRUE(twin_of(randn({4, 3, 8, 8}), 1)->coalesces_with(*twin_of(randn({4, 3, 8, 8}), 1)));
  EXPECT_TRUE(twin_of(randn({4, 3, 8, 8}), 1)->coalesces_with(*twin_of(randn({2, 3, 8, 8}), 1)));
  // 4 images of 16x16: 1024 output pixels; at stride 2, 256.
  EXPECT_FALSE(
      twin_of(randn({4, 3, 16, 16}), 1)->coalesces_with(*twin_of(randn({4, 3, 16, 16}), 1)));
  EXPECT_TRUE(
      twin_of(randn({4, 3, 16, 16}), 2)->coalesces_with(*twin_of(randn({4, 3, 16, 16}), 2)));
  // Different image sizes never stack.
  EXPECT_FALSE(twin_of(randn({4, 3, 8, 8}), 1)->coalesces_with(*twin_of(randn({4, 3, 6, 6}), 1)));
}

class DeferredGradients : public ::testing::TestWithParam<int64_t> {};

// Same gradients for the input and every parameter, with micro-batches of
// GetParam() rows (coalesced weight halves) or none.
TEST_P(DeferredGradients, EqualTheUndeferredOnes) {
  const int64_t split = GetParam();
  const Tensor x0 = randn({5, 3, 6, 6}, kFloat64);
  const Tensor target = randn({5, 6}, kFloat64);
  const Net ref = make_net(3), net = make_net(3);
  Tensor x_ref = x0.clone().requires_grad_(), x = x0.clone().requires_grad_();
  mse_loss(run_split(ref, x_ref, split), target).backward();
  {
    DeferWeightGradGuard defer;
    mse_loss(run_split(net, x, split), target).backward();
  }
  EXPECT_TRUE(AllClose(x.grad(), x_ref.grad(), 1e-12, 1e-12));
  for (size_t i = 0; i < params(net).size(); ++i)
    EXPECT_TRUE(AllClose(params(net)[i].grad(), params(ref)[i].grad(), 1e-12, 1e-12))
        << "parameter " << i;
}

INSTANTIATE_TEST_SUITE_P(Splits, DeferredGradients, ::testing::Values(5, 2, 1));

// Two 1-D inputs have no batch dim to stack: their weight halves run one
// by one and still give the right gradient.
TEST(DeferWeightGrad, OneDimensionalLinearInputs) {
  Generator gen(8);
  const Tensor w = randn({3, 4}, kFloat64, &gen).requires_grad_();
  const Tensor w_ref = w.detach().clone().requires_grad_();
  const Tensor x1 = randn({4}, kFloat64, &gen).requires_grad_();
  const Tensor x2 = randn({4}, kFloat64, &gen).requires_grad_();
  (linear(x1, w_ref) * linear(x2, w_ref)).sum().backward();
  const Tensor g1 = x1.grad().clone(), g2 = x2.grad().clone();
  x1.set_grad(Tensor());
  x2.set_grad(Tensor());
  {
    DeferWeightGradGuard defer;
    (linear(x1, w) * linear(x2, w)).sum().backward();
  }
  EXPECT_TRUE(AllClose(w.grad(), w_ref.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(AllClose(x1.grad(), g1, 1e-12, 1e-12));
  EXPECT_TRUE(AllClose(x2.grad(), g2, 1e-12, 1e-12));
}

TEST(DeferWeightGrad, WeightHalvesRunAfterTheInputGradients) {
  // Without deferral the last layer's weight gradient is accumulated before
  // the input's gradient exists; with it, after.
  for (bool defer : {false, true}) {
    const Net n = make_net(4);
    Tensor x = randn({2, 3, 6, 6}, kFloat64).requires_grad_();
    std::vector<std::string> order;
    x.register_hook([&](const Tensor&) {
      order.push_back("input");
      return Tensor();
    });
    n.w3.register_post_accumulate_grad_hook([&](Tensor&) { order.push_back("w3"); });
    {
      DeferWeightGradGuard guard(defer);
      run_net(n, x).sum().backward();
    }
    ASSERT_EQ(order.size(), 2u);
    EXPECT_EQ(order[0], defer ? "input" : "w3") << "defer " << defer;
  }
}

TEST(DeferWeightGrad, GradOfTheInputSkipsTheWeightHalves) {
  const Net n = make_net(5);
  const Tensor x = randn({3, 3, 6, 6}, kFloat64).requires_grad_();
  const Tensor ref = autograd::grad({run_net(n, x).sum()}, {x})[0];
  DeferWeightGradGuard defer;
  const Tensor gx = autograd::grad({run_split(n, x, 1).sum()}, {x})[0];
  EXPECT_TRUE(AllClose(gx, ref, 1e-12, 1e-12));
  for (const Tensor& p : params(n)) EXPECT_FALSE(p.grad().defined());
}

TEST(DeferWeightGrad, RetainGraphRunsTheWeightHalvesAgain) {
  const Net n = make_net(6);
  const Tensor x = randn({4, 3, 6, 6}, kFloat64).requires_grad_();
  DeferWeightGradGuard defer;
  const Tensor loss = run_split(n, x, 2).sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  const Tensor once = n.w2.grad().clone();
  loss.backward();
  EXPECT_TRUE(AllClose(n.w2.grad(), once * 2.0, 1e-12, 1e-12));
}

TEST(DeferWeightGrad, TwoDevicePipelineGradientsMatch) {
  // Stage 1 on cpu:0, stage 2 on cpu:1, three micro-batches.
  const Device d0(kCPU, 0), d1(kCPU, 1);
  const Net ref = make_net(7);
  Net net = make_net(7);
  {
    NoGradGuard no_grad;
    for (Tensor* p : {&net.w2, &net.b2, &net.w3, &net.b3}) {
      *p = p->to(d1);
      p->requires_grad_();
    }
  }
  const Tensor x = randn({6, 3, 6, 6}, kFloat64);
  run_net(ref, x).pow(2).sum().backward();
  DeferWeightGradGuard defer;
  std::vector<Tensor> outs;
  for (const Tensor& part : x.split(2, 0)) {
    Tensor h = conv2d(part, net.w1, net.b1, {1, 1}, {1, 1}).relu().to(d1);
    h = conv2d(h, net.w2, net.b2, {2, 2}, {1, 1}).relu();
    outs.push_back(linear(h.flatten(1), net.w3, net.b3));
  }
  cat(outs, 0).pow(2).sum().backward();
  for (size_t i = 0; i < params(net).size(); ++i)
    EXPECT_TRUE(AllClose(params(net)[i].grad().to(d0), params(ref)[i].grad(), 1e-12, 1e-12))
        << "parameter " << i;
}

// ---- the engine's grouping of deferred nodes ------------------------------------

// y = x * w for one-element x and w, recorded by hand so the test sees how the engine runs the
// weight half: its twin counts applies and group sizes.
struct Calls {
  std::atomic<int> single{0}, groups{0}, grouped_nodes{0};
};

class ScaleBackward final : public autograd::Node {
 public:
  explicit ScaleBackward(std::shared_ptr<Calls> calls) : calls_(std::move(calls)) {}
  std::string name() const override { return "ScaleBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor gx, gw;
    if (needs_input_grad(0)) gx = grads[0] * w;
    if (needs_input_grad(1)) {
      ++calls_->single;
      gw = grads[0] * x;
    }
    return autograd::pass_through(*this, {gx, gw}, grads[0]);
  }
  bool coalesces_with(const Node& other) const override {
    return dynamic_cast<const ScaleBackward*>(&other) != nullptr;
  }
  std::vector<Tensor> apply_coalesced(const std::vector<Node*>& group,
                                      std::vector<std::vector<Tensor>>&& grads) override {
    ++calls_->groups;
    calls_->grouped_nodes += static_cast<int>(group.size());
    Tensor gw;
    for (size_t k = 0; k < group.size(); ++k) {
      const Tensor part = grads[k][0] * static_cast<ScaleBackward*>(group[k])->x;
      gw = gw.defined() ? gw + part : part;
    }
    return {Tensor(), gw};
  }
  Tensor x, w;

 private:
  std::shared_ptr<Calls> calls_;
};

Tensor scale(const Tensor& x, const Tensor& w, const std::shared_ptr<Calls>& calls) {
  Tensor y = x.detach() * w.detach();
  if (auto node = autograd::record<ScaleBackward>({x, w}, {y}, calls)) {
    node->x = x.detach();
    node->w = w.detach();
    auto twin = std::make_shared<ScaleBackward>(calls);
    twin->x = node->x;
    twin->w = node->w;
    EXPECT_TRUE(autograd::split_off_deferred(*node, twin, 1));
  }
  return y;
}

TEST(DeferWeightGrad, ReadyWeightHalvesOfOneParameterRunAsOneGroup) {
  auto calls = std::make_shared<Calls>();
  const Tensor w = tensor<double>({2.0}, {1}).requires_grad_();
  const Tensor x = tensor<double>({1, 2, 3, 4}).requires_grad_();
  std::vector<Tensor> parts;
  for (const Tensor& p : x.split(1, 0)) parts.push_back(scale(p, w, calls));
  cat(parts, 0).sum().backward();
  EXPECT_EQ(calls->single.load(), 0);
  EXPECT_EQ(calls->groups.load(), 1);
  EXPECT_EQ(calls->grouped_nodes.load(), 4);
  EXPECT_TRUE(AllClose(w.grad(), tensor<double>({10.0}, {1})));
  EXPECT_TRUE(AllClose(x.grad(), tensor<double>({2, 2, 2, 2})));
}

TEST(DeferWeightGrad, HalvesOfDifferentParametersDoNotGroup) {
  auto calls = std::make_shared<Calls>();
  const Tensor w1 = tensor<double>({2.0}, {1}).requires_grad_();
  const Tensor w2 = tensor<double>({3.0}, {1}).requires_grad_();
  const Tensor x = tensor<double>({1, 2}).requires_grad_();
  const std::vector<Tensor> p = x.split(1, 0);
  cat({scale(p[0], w1, calls), scale(p[1], w2, calls)}, 0).sum().backward();
  EXPECT_EQ(calls->single.load(), 2);
  EXPECT_EQ(calls->groups.load(), 0);
  EXPECT_TRUE(AllClose(w1.grad(), tensor<double>({1.0}, {1})));
  EXPECT_TRUE(AllClose(w2.grad(), tensor<double>({2.0}, {1})));
}

// ---- in-place accumulation of incoming gradients ---------------------------------

// Returns the same gradient tensor it keeps (a node that holds on to what it
// passes on): the engine must not add into it in place.
class KeepsItsGradient final : public autograd::Node {
 public:
  std::string name() const override { return "KeepsItsGradient"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    kept = grads[0].clone();
    return {kept};
  }
  Tensor kept;
};

TEST(Engine, AccumulatesIntoAGradientOthersHoldOutOfPlace) {
  const Tensor x = tensor<double>({1, 2, 3}).requires_grad_();
  const Tensor a = x * 1.0;  // its node receives two contributions
  const Tensor c = a * 1.0;  // created first, so its backward runs last
  Tensor b = a.detach();
  auto keeper = autograd::record<KeepsItsGradient>({a}, {b});
  ASSERT_NE(keeper, nullptr);
  (b * 10.0 + c).sum().backward();
  EXPECT_TRUE(AllClose(keeper->kept, tensor<double>({10, 10, 10})));
  EXPECT_TRUE(AllClose(x.grad(), tensor<double>({11, 11, 11})));
}

}  // namespace
}  // namespace loom
