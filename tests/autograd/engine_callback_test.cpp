// autograd::queue_callback: work a hook schedules for the end of the pass
// (what DDP uses to wait for its all-reduces before backward returns).
#include <atomic>
#include <thread>
#include <vector>

#include "tests/TestUtil.h"

namespace loom {
namespace {

TEST(EngineCallback, RunsOnceAfterEveryNodeBeforeBackwardReturns) {
  Tensor a = ones({3}).requires_grad_();
  Tensor b = ones({3}).requires_grad_();
  std::vector<std::string> events;
  std::thread::id callback_thread;
  a.register_post_accumulate_grad_hook([&](Tensor&) {
    events.push_back("a");
    autograd::queue_callback([&] {
      events.push_back("callback");
      callback_thread = std::this_thread::get_id();
      // Every gradient is in place when the callback runs.
      EXPECT_TRUE(a.grad().defined());
      EXPECT_TRUE(b.grad().defined());
    });
  });
  b.register_post_accumulate_grad_hook([&](Tensor&) { events.push_back("b"); });
  ((a * 2.0) * b).sum().backward();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events.back(), "callback");
  EXPECT_EQ(callback_thread, std::this_thread::get_id());

  // Not carried over to the next pass.
  events.clear();
  b.sum().backward();
  EXPECT_EQ(events, std::vector<std::string>{"b"});
}

TEST(EngineCallback, CallbacksRunInOrderAndMayQueueMore) {
  Tensor a = ones({2}).requires_grad_();
  std::vector<int> order;
  a.register_post_accumulate_grad_hook([&](Tensor&) {
    autograd::queue_callback([&] {
      order.push_back(1);
      autograd::queue_callback([&] { order.push_back(3); });
    });
    autograd::queue_callback([&] { order.push_back(2); });
  });
  a.sum().backward();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(EngineCallback, QueuedFromAnotherDevicesThread) {
  // The hook of a cpu:1 leaf runs on cpu:1's engine thread; its callback still
  // runs on the caller's thread, after the whole pass.
  Tensor x0 = ones({2}).requires_grad_();
  Tensor x1 = ones({2}, TensorOptions().device(Device("cpu:1"))).requires_grad_();
  std::atomic<int> ran{0};
  std::thread::id callback_thread;
  x1.register_post_accumulate_grad_hook([&](Tensor&) {
    autograd::queue_callback([&] {
      ++ran;
      callback_thread = std::this_thread::get_id();
    });
  });
  (x0.sum() + x1.sum().to(Device("cpu"))).backward();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(callback_thread, std::this_thread::get_id());
}

TEST(EngineCallback, ErrorFromCallbackPropagatesOutOfBackward) {
  Tensor a = ones({2}).requires_grad_();
  a.register_post_accumulate_grad_hook([&](Tensor&) {
    autograd::queue_callback([] { LOOM_FAIL("reducer: parameter w got no gradient"); });
  });
  EXPECT_LOOM_ERROR(a.sum().backward(), "parameter w got no gradient");
}

TEST(EngineCallback, AlsoRunsForGrad) {
  Tensor a = ones({2}).requires_grad_();
  bool ran = false;
  Tensor y = (a * 3.0).sum();
  y.grad_fn()->add_pre_hook(0, [&](const Tensor&) {
    autograd::queue_callback([&] { ran = true; });
    return Tensor();
  });
  autograd::grad({y}, {a});
  EXPECT_TRUE(ran);
}

TEST(EngineCallback, OutsideBackwardThrows) {
  EXPECT_LOOM_ERROR(autograd::queue_callback([] {}), "no backward pass is running");
}

}  // namespace
}  // namespace loom
