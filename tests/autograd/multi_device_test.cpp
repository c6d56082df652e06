// The engine runs each device's nodes on that device's thread: backward of two
// branches on cpu:0 and cpu:1 overlaps in time.
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;
using testing::AllClose;

// Spins (busy, not sleeping) until `other_started` is set or the deadline passes.
void spin_until(const std::atomic<bool>& other_started, Clock::duration limit) {
  const auto deadline = Clock::now() + limit;
  volatile double sink = 0;
  while (!other_started.load() && Clock::now() < deadline) sink = sink + 1.0;
  // Keep working a little longer so both are busy at the same moment.
  const auto extra = Clock::now() + std::chrono::milliseconds(50);
  while (Clock::now() < extra) sink = sink + 1.0;
}

TEST(MultiDevice, BackwardBranchesOnTwoCpuDevicesOverlap) {
  const Device d0("cpu"), d1("cpu:1");
  Tensor x0 = ones({4}, TensorOptions().device(d0)).requires_grad_();
  Tensor x1 = ones({4}, TensorOptions().device(d1)).requires_grad_();
  Tensor y0 = x0 * 2.0f;
  Tensor y1 = x1 * 3.0f;

  std::atomic<bool> started0{false}, started1{false};
  std::atomic<bool> overlap0{false}, overlap1{false};
  std::thread::id thread0, thread1;
  y0.register_hook([&](const Tensor&) {
    thread0 = std::this_thread::get_id();
    started0 = true;
    spin_until(started1, std::chrono::seconds(10));
    overlap0 = started1.load();
    return Tensor();
  });
  y1.register_hook([&](const Tensor& g) {
    EXPECT_EQ(g.device(), d1);
    thread1 = std::this_thread::get_id();
    started1 = true;
    spin_until(started0, std::chrono::seconds(10));
    overlap1 = started0.load();
    return Tensor();
  });

  Tensor loss = y0.sum() + y1.sum().to(d0);
  loss.backward();

  EXPECT_TRUE(overlap0.load()) << "cpu:0 branch never saw cpu:1's branch running";
  EXPECT_TRUE(overlap1.load()) << "cpu:1 branch never saw cpu:0's branch running";
  EXPECT_NE(thread0, thread1);
  EXPECT_EQ(x1.grad().device(), d1);
  EXPECT_TRUE(AllClose(x0.grad(), full({4}, 2.0f)));
  EXPECT_TRUE(AllClose(x1.grad().to(d0), full({4}, 3.0f)));
}

TEST(MultiDevice, CrossDeviceOpNamesBothDevices) {
  Tensor a = ones({2}, TensorOptions().device(Device("cpu")));
  Tensor b = ones({2}, TensorOptions().device(Device("cpu:1")));
  EXPECT_LOOM_ERROR(a + b, "same device", "cpu", "cpu:1", ".to(device)");
}

// Scalar operands (`x * 2`, `2 - x`) are CPU 0-dim tensors made on the
// tensor's own logical device, and a CPU 0-dim tensor from another device
// may stand beside any tensor (as beside a CUDA one): the op runs where the
// tensor is, and the scalar's gradient returns to the scalar's device.
TEST(MultiDevice, ScalarOperandsRunOnTheTensorsDevice) {
  const Device d1("cpu:1");
  const Tensor x = full({3}, 4.0f, TensorOptions().device(d1));
  EXPECT_EQ((x * 2).device(), d1);
  EXPECT_EQ((2 - x).device(), d1);
  EXPECT_EQ(x.gt(1).device(), d1);
  EXPECT_TRUE(AllClose((2 - x).to(Device("cpu")), full({3}, -2.0f)));
  Tensor w = scalar_tensor(3.0f).requires_grad_();  // on cpu:0
  const Tensor xr = x.detach().requires_grad_();
  const Tensor y = w * xr;
  EXPECT_EQ(y.device(), d1);
  y.sum().backward();
  EXPECT_EQ(w.grad().device(), Device("cpu"));
  EXPECT_FLOAT_EQ(w.grad().item<float>(), 12.0f);
  EXPECT_EQ(xr.grad().device(), d1);
  // A one-element tensor that is not 0-dim is no scalar.
  const Tensor one = ones({1});
  EXPECT_LOOM_ERROR(x + one, "same device", "cpu", "cpu:1");
}

TEST(MultiDevice, ErrorInOneDeviceThreadReachesCaller) {
  Tensor x1 = ones({2}, TensorOptions().device(Device("cpu:1"))).requires_grad_();
  Tensor y1 = x1 * 2.0f;
  y1.register_hook([](const Tensor&) -> Tensor { throw Error("hook failed on purpose"); });
  Tensor loss = y1.sum().to(Device("cpu"));
  EXPECT_LOOM_ERROR(loss.backward(), "hook failed on purpose");
  // The engine is still usable afterwards.
  Tensor z = (x1 * 5.0f).sum().to(Device("cpu"));
  z.backward();
  EXPECT_TRUE(AllClose(x1.grad().to(Device("cpu")), full({2}, 5.0f)));
}

// In a micro-batch pipeline stage 1 runs ahead of stage 2, so each hand-over
// copy is created before most of stage 2's nodes.  Its backward must still run
// as soon as its gradient is complete (handing stage 1 its work), not after
// every node created later.  `hand_over` moves a cpu tensor to cpu:1.
void expect_hand_over_runs_as_soon_as_ready(
    const std::function<Tensor(const Tensor&)>& hand_over) {
  const Device d0("cpu");
  Tensor w = ones({4}, TensorOptions().device(d0)).requires_grad_();
  // Stage 1 of both micro-batches, then both hand-overs.
  Tensor a1 = w * 2.0f, a2 = w * 3.0f;
  Tensor c1 = hand_over(a1), c2 = hand_over(a2);
  // Stage 2 of micro-batch 1, then of micro-batch 2.
  Tensor y1 = ((c1 * 2.0f) + 1.0f) * 2.0f;
  Tensor y2 = ((c2 * 2.0f) + 1.0f) * 2.0f;

  std::mutex mutex;
  std::vector<std::string> order;
  auto mark = [&](const std::string& what) {
    return [&, what](const Tensor&) {
      std::lock_guard<std::mutex> lock(mutex);
      order.push_back(what);
      return Tensor();
    };
  };
  y1.register_hook(mark("stage 2 of micro-batch 1"));
  y2.register_hook(mark("stage 2 of micro-batch 2"));
  c1.register_hook(mark("hand-over of micro-batch 1"));
  c2.register_hook(mark("hand-over of micro-batch 2"));
  (y1.sum() + y2.sum()).backward();

  EXPECT_EQ(order, (std::vector<std::string>{
                       "stage 2 of micro-batch 2", "hand-over of micro-batch 2",
                       "stage 2 of micro-batch 1", "hand-over of micro-batch 1"}));
  EXPECT_TRUE(AllClose(w.grad(), full({4}, 2.0f * 4.0f + 3.0f * 4.0f)));
}

TEST(MultiDevice, HandOverToAnotherDeviceRunsAsSoonAsReady) {
  expect_hand_over_runs_as_soon_as_ready([](const Tensor& t) { return t.to(Device("cpu:1")); });
}

TEST(MultiDevice, HandOverByCopyIntoAnotherDeviceRunsAsSoonAsReady) {
  expect_hand_over_runs_as_soon_as_ready([](const Tensor& t) {
    Tensor out = zeros(t.sizes(), TensorOptions().device(Device("cpu:1")));
    out.copy_(t);
    return out;
  });
}

}  // namespace
}  // namespace loom
