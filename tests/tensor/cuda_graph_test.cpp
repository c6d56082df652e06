// cuda::Graph: capture once, replay with new data in the same memory.  A
// captured training step equals the same steps run eagerly; what a capture
// may not do is refused with a clear error and leaves the graph reusable.
// Tagged gpu (skips without one), except the first case, which pins the
// error on machines without a GPU.
#include "tensor/CudaGraph.h"

#include <vector>

#include "loom.h"
#include "tensor/CudaMemory.h"
#include "tests/CudaTestUtil.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing_cuda::CudaTest;
using testing_cuda::kGpu;

TEST(CudaGraphWithoutGpu, CaptureNeedsADevice) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is visible";
  cuda::Graph graph;
  EXPECT_LOOM_ERROR(graph.capture_begin(0), "CUDA device 0 is not available");
  EXPECT_FALSE(graph.is_capturing());
  EXPECT_LOOM_ERROR(graph.replay(), "nothing captured");
  EXPECT_FALSE(cuda::is_current_stream_capturing(0));
}

class CudaGraph : public CudaTest {};

TEST_F(CudaGraph, ReplayRecomputesFromTheStaticInput) {
  Tensor x = full({1000}, 1.0, TensorOptions(kFloat32).device(kGpu));
  cuda::Graph graph;
  graph.capture_begin();
  EXPECT_TRUE(graph.is_capturing());
  EXPECT_TRUE(cuda::is_current_stream_capturing(0));
  Tensor y = (x * 2 + 1).sum();
  graph.capture_end();
  EXPECT_FALSE(cuda::is_current_stream_capturing(0));
  for (double v : {3.0, -1.5, 0.25}) {
    x.fill_(v);
    graph.replay();
    EXPECT_DOUBLE_EQ(y.item<double>(), 1000 * (2 * v + 1));
  }
  // Its memory survives empty_cache.
  cuda::empty_cache();
  x.fill_(2.0);
  graph.replay();
  EXPECT_DOUBLE_EQ(y.item<double>(), 5000);
}

// A whole step (forward, cross-entropy, backward, SGD with momentum) replayed
// on fresh batches equals the same steps run eagerly.
TEST_F(CudaGraph, CapturedTrainingStepEqualsEagerSteps) {
  const auto make = [] {
    manual_seed(11);
    nn::models::ConvNet model;
    model->to(kGpu);
    return model;
  };
  nn::models::ConvNet eager = make(), graphed = make();
  optim::SGD eager_opt(eager->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  optim::SGD graph_opt(graphed->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  nn::CrossEntropyLoss criterion;
  std::vector<Tensor> images, labels;
  manual_seed(12);
  for (int i = 0; i < 6; ++i) {
    images.push_back(randn({16, 1, 28, 28}).to(kGpu));
    labels.push_back(randint(0, 10, {16}).to(kGpu));
  }
  const auto step = [&](nn::models::ConvNet& model, optim::SGD& opt, const Tensor& x,
                        const Tensor& y) {
    opt.zero_grad();
    Tensor loss = criterion(model(x), y);
    loss.backward();
    opt.step();
    return loss;
  };
  std::vector<double> eager_losses;
  for (int i = 0; i < 6; ++i) eager_losses.push_back(step(eager, eager_opt, images[i], labels[i]).item<double>());

  Tensor x = images[0].clone(), y = labels[0].clone();
  for (int i = 0; i < 2; ++i) {  // warm-up, eager, on the static tensors
    x.copy_(images[i]);
    y.copy_(labels[i]);
    step(graphed, graph_opt, x, y);
  }
  cuda::Graph graph;
  graph.capture_begin();
  Tensor loss = step(graphed, graph_opt, x, y);
  graph.capture_end();
  for (int i = 2; i < 6; ++i) {
    x.copy_(images[i]);
    y.copy_(labels[i]);
    graph.replay();
    EXPECT_NEAR(loss.item<double>(), eager_losses[i], 1e-5 * std::abs(eager_losses[i])) << "step " << i;
  }
  const auto a = eager->parameters(), b = graphed->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE((a[i] - b[i]).abs().max().item<double>(), 1e-5) << "parameter " << i;
}

TEST_F(CudaGraph, WaitingForTheDeviceInsideACaptureIsRefused) {
  Tensor x = ones({4}, TensorOptions(kFloat32).device(kGpu));
  cuda::Graph graph;
  graph.capture_begin();
  Tensor s = x.sum();
  EXPECT_LOOM_ERROR(s.item(), "cannot run while a cuda::Graph is being captured on cuda:0",
                    "waits for the device");
  EXPECT_LOOM_ERROR(dropout(x, 0.5, true), "dropout cannot run while a cuda::Graph");
  graph.reset();
  EXPECT_FALSE(graph.is_capturing());
  EXPECT_EQ(x.sum().item<double>(), 4.0);  // the thread's stream is back
  // The graph can be captured again.
  graph.capture_begin();
  Tensor t = x * 3;
  graph.capture_end();
  graph.replay();
  EXPECT_EQ(t.sum().item<double>(), 12.0);
}

TEST_F(CudaGraph, AdamStepsAreRefusedInsideACapture) {
  Tensor w = ones({3}, TensorOptions(kFloat32).device(kGpu)).requires_grad_(true);
  optim::Adam adam({w}, optim::AdamOptions(0.1));
  (w * w).sum().backward();
  adam.step();  // creates its state
  cuda::Graph graph;
  graph.capture_begin();
  EXPECT_LOOM_ERROR(adam.step(), "Adam cannot run while a cuda::Graph", "step count");
  graph.reset();
}

// A block used on another stream and freed during a capture waits without
// an event (none may be queried during a capture); the capture still ends
// cleanly, and once it has, the allocator records and retires the event.
TEST_F(CudaGraph, BlocksFreedOnOtherStreamsDuringACaptureWaitWithoutEvents) {
  Tensor x = ones({1024}, TensorOptions(kFloat32).device(kGpu));
  const uint64_t copy = Stream::copy_stream(kGpu).native_handle();
  const int64_t pending_before = cuda::memory_stats(0).num_pending_frees;
  cuda::Graph graph;
  graph.capture_begin();
  Tensor y = x * 2;
  {
    Tensor scratch = x + 1;
    cuda::record_stream(scratch.storage(), copy);
  }  // freed during the capture
  EXPECT_EQ(cuda::memory_stats(0).num_pending_frees, pending_before + 1);
  graph.capture_end();
  graph.replay();
  EXPECT_EQ(y.sum().item<double>(), 2048.0);
  cuda::synchronize();
  cuda::empty_cache();  // records the deferred event, waits, pools the block
  EXPECT_EQ(cuda::memory_stats(0).num_pending_frees, 0);
}

TEST_F(CudaGraph, MisuseIsReported) {
  cuda::Graph graph;
  EXPECT_LOOM_ERROR(graph.capture_end(), "not capturing");
  graph.capture_begin();
  EXPECT_LOOM_ERROR(graph.capture_begin(), "already capturing");
  EXPECT_LOOM_ERROR(graph.replay(), "still being captured");
  graph.capture_end();
  EXPECT_LOOM_ERROR(graph.capture_begin(), "call reset() first");
}

}  // namespace
}  // namespace loom
