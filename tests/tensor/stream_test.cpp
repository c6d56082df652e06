// Streams on CPU logical devices: order, events across devices, errors,
// grad mode on the worker, intra-op thread share, lifetime.
#include "tensor/Stream.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <unistd.h>

#include "tensor/CudaRuntime.h"
#include "tests/TestUtil.h"

// The death tests fork after stream workers exist.  glibc keeps each thread's
// thread_local destructor list in memory only that thread references, so in
// the child (where the parent's workers do not exist) LeakSanitizer reports
// those lists.  They are not loom's allocations; tell LSan so.  Without a
// sanitizer this function is never called.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:__cxa_thread_atexit_impl\n";
}

namespace loom {
namespace {

using testing::AllClose;

const Device kCpu0("cpu");
const Device kCpu1("cpu:1");

TEST(Stream, RunsSubmittedWorkInOrderOnItsOwnThread) {
  Stream s = Stream::create(kCpu1);
  std::vector<int> order;  // touched only by the worker until synchronize
  std::thread::id worker;
  for (int i = 0; i < 100; ++i)
    s.submit([&order, &worker, i] {
      if (i > 0) {
        EXPECT_EQ(worker, std::this_thread::get_id());
      }
      worker = std::this_thread::get_id();
      order.push_back(i);
    });
  s.synchronize();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_NE(worker, std::this_thread::get_id());
  EXPECT_TRUE(s.query());
  EXPECT_EQ(s.device(), kCpu1);
}

TEST(Stream, DefaultAndCopyStreamsAreDistinctAndStable) {
  EXPECT_EQ(Stream::default_stream(kCpu1), Stream::default_stream(kCpu1));
  EXPECT_EQ(Stream::copy_stream(kCpu1), Stream::copy_stream(kCpu1));
  EXPECT_NE(Stream::default_stream(kCpu1), Stream::copy_stream(kCpu1));
  EXPECT_NE(Stream::default_stream(kCpu0), Stream::default_stream(kCpu1));
  EXPECT_NE(Stream::create(kCpu0), Stream::create(kCpu0));
  EXPECT_EQ(Stream::default_stream(kCpu1).name(), "cpu:1 default stream");
  EXPECT_EQ(Stream::copy_stream(kCpu0).name(), "cpu copy stream");
}

TEST(Stream, WaitEventOrdersWorkAcrossTwoDevices) {
  Stream producer = Stream::create(kCpu0);
  Stream consumer = Stream::create(kCpu1);
  std::atomic<bool> release{false};
  std::atomic<bool> produced{false};
  bool consumer_saw_product = false;
  producer.submit([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    produced = true;
  });
  Event ready = producer.record();
  consumer.wait_event(ready);
  consumer.submit([&] { consumer_saw_product = produced.load(); });
  Event consumed = consumer.record();
  // Neither can finish while the producer is held.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(ready.query());
  EXPECT_FALSE(consumed.query());
  EXPECT_FALSE(consumer.query());
  release = true;
  consumed.synchronize();
  EXPECT_TRUE(ready.query());
  EXPECT_TRUE(consumer_saw_product);
}

TEST(Stream, TensorHandOverBetweenDevicesWithEvents) {
  Stream s0 = Stream::create(kCpu0);
  Stream s1 = Stream::create(kCpu1);
  Tensor x = arange(0, 6, 1, kFloat32).reshape({2, 3});
  Tensor y0, y1, out;
  s0.submit([&, x] { y0 = x * 2.0f; });
  Event e0 = s0.record();
  Stream copy = Stream::copy_stream(kCpu1);
  copy.wait_event(e0);
  copy.submit([&] { y1 = y0.to(kCpu1); });
  s1.wait_event(copy.record());
  s1.submit([&] { out = y1 + 1.0f; });
  s1.synchronize();
  EXPECT_EQ(out.device(), kCpu1);
  EXPECT_TRUE(AllClose(out.to(kCpu0), x * 2.0f + 1.0f));
}

TEST(Stream, RecordQuerySynchronizeAndElapsed) {
  Stream s = Stream::create(kCpu1);
  Event start = s.record();
  std::atomic<bool> release{false};
  s.submit([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  Event end = s.record();
  start.synchronize();
  EXPECT_TRUE(start.query());
  EXPECT_FALSE(end.query());
  EXPECT_LOOM_ERROR(start.elapsed_ms(end), "complete");
  release = true;
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GE(start.elapsed_ms(end), 15.0);
  EXPECT_EQ(end.stream_name(), s.name());
  Event none;
  EXPECT_TRUE(none.query());
  none.synchronize();
  EXPECT_LOOM_ERROR(none.elapsed_ms(end), "recorded");
}

TEST(Stream, ErrorIsRethrownBySynchronizeNamingTheStreamAndSkipsLaterWork) {
  Stream s = Stream::create(kCpu1);
  std::atomic<int> ran{0};
  s.submit([&] { ++ran; });
  s.submit([] { throw Error("closure failed on purpose"); });
  s.submit([&] { ran += 10; });  // skipped
  Event after = s.record();
  s.submit([&] { ran += 100; });  // skipped
  EXPECT_LOOM_ERROR(s.synchronize(), "closure failed on purpose", s.name());
  EXPECT_EQ(ran.load(), 1);
  // The event recorded after the failure carries it too.
  EXPECT_LOOM_ERROR(after.synchronize(), "closure failed on purpose");
  // Reported: the stream runs work again.
  s.submit([&] { ran += 1000; });
  s.synchronize();
  EXPECT_EQ(ran.load(), 1001);
  // Non-loom exceptions are wrapped too.
  s.submit([] { throw std::runtime_error("plain runtime_error"); });
  EXPECT_LOOM_ERROR(s.synchronize(), "plain runtime_error", "cpu:1 stream");
}

TEST(Stream, ErrorPassesThroughWaitEventToTheWaitingStream) {
  Stream a = Stream::create(kCpu0);
  Stream b = Stream::create(kCpu1);
  std::atomic<bool> b_ran{false};
  a.submit([] { throw Error("stage 0 failed"); });
  b.wait_event(a.record());
  b.submit([&] { b_ran = true; });
  EXPECT_LOOM_ERROR(b.synchronize(), "stage 0 failed", a.name());
  EXPECT_FALSE(b_ran.load());
  EXPECT_LOOM_ERROR(a.synchronize(), "stage 0 failed");
  a.synchronize();  // reported once
  b.synchronize();
}

TEST(Stream, EmptyClosureIsAnError) {
  EXPECT_LOOM_ERROR(Stream::create(kCpu1).submit(nullptr), "empty");
}

// Where no GPU can be used (CPU-only build, or no device visible), every CUDA
// stream entry point says which and why; with a GPU, a bad index does.
TEST(Stream, UnusableCudaDevicesAreErrorsNamingTheDevice) {
  const std::string why = !cuda::built_with_cuda() ? "loom was built without CUDA"
                          : !cuda::is_available()   ? "no CUDA device is visible"
                                                    : "invalid CUDA device index";
  const Device bad(kCUDA, cuda::is_available() ? cuda::device_count() : 0);
  const std::string index = "CUDA device " + std::to_string(bad.index);
  const std::string named = cuda::is_available() ? "invalid CUDA device index" : index;
  EXPECT_LOOM_ERROR(Stream::create(bad), "Stream::create", named, why);
  EXPECT_LOOM_ERROR(Stream::create(bad, -1), "Stream::create", why);
  EXPECT_LOOM_ERROR(Stream::default_stream(bad), "Stream::default_stream", why);
  EXPECT_LOOM_ERROR(Stream::copy_stream(bad), "Stream::copy_stream", why);
  EXPECT_LOOM_ERROR(Stream::priority_range(bad), "Stream::priority_range", why);
  EXPECT_LOOM_ERROR(current_stream(bad), "Stream::default_stream", why);
  // The handle lookup never throws: the default (legacy) stream.
  EXPECT_EQ(cuda::current_stream_handle(bad.index), 0u);
  EXPECT_EQ(cuda::current_stream_handle(-1), 0u);
}

TEST(Stream, CpuStreamsHaveOnlyPriorityZeroAndNoNativeHandle) {
  const Stream::PriorityRange range = Stream::priority_range(kCpu1);
  EXPECT_EQ(range.least, 0);
  EXPECT_EQ(range.greatest, 0);
  Stream s = Stream::create(kCpu1, 0);
  EXPECT_EQ(s.priority(), 0);
  EXPECT_LOOM_ERROR(Stream::create(kCpu1, -1), "Stream::create", "priority -1",
                    "CPU streams have no priorities");
  EXPECT_LOOM_ERROR(Stream::create(kCpu1, 2), "priority 2", "cpu:1");
  EXPECT_LOOM_ERROR(s.native_handle(), "Stream::native_handle", "CPU stream", s.name());
  // record(true) on a CPU stream is record(): CPU events always carry a time.
  Event a = s.record(true);
  s.submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
  Event b = s.record();
  b.synchronize();
  EXPECT_GE(a.elapsed_ms(b), 4.0);
}

TEST(Stream, GradModeIsCarriedAndForwardOnCpu1RecordsHistory) {
  Tensor w = testing::random_leaf({3, 3}, 1);
  Tensor x = testing::random_leaf({2, 3}, 2);
  Tensor w1 = w.to(kCpu1);
  Tensor x1, y1, y_nograd;
  bool worker_grad_enabled = false;
  Stream s = Stream::default_stream(kCpu1);
  s.submit([&] {
    worker_grad_enabled = autograd::GradMode::is_enabled();
    x1 = x.to(kCpu1);
    y1 = matmul(x1, w1).relu();
  });
  {
    NoGradGuard no_grad;
    s.submit([&] { y_nograd = matmul(x.to(kCpu1), w1); });
  }
  s.synchronize();
  EXPECT_TRUE(worker_grad_enabled);
  EXPECT_TRUE(y1.requires_grad());
  EXPECT_FALSE(y_nograd.requires_grad());
  Tensor loss = y1.sum().to(kCpu0);
  loss.backward();
  Tensor expected_w = w.detach().requires_grad_();
  Tensor expected_x = x.detach().requires_grad_();
  matmul(expected_x, expected_w).relu().sum().backward();
  EXPECT_TRUE(AllClose(w.grad(), expected_w.grad()));
  EXPECT_TRUE(AllClose(x.grad(), expected_x.grad()));
}

TEST(Stream, CurrentStreamAndGuard) {
  EXPECT_EQ(current_stream(kCpu1), Stream::default_stream(kCpu1));
  Stream s = Stream::create(kCpu1);
  {
    StreamGuard guard(s);
    EXPECT_EQ(current_stream(kCpu1), s);
    EXPECT_EQ(current_stream(kCpu0), Stream::default_stream(kCpu0));
  }
  EXPECT_EQ(current_stream(kCpu1), Stream::default_stream(kCpu1));
  bool inside = false;
  s.submit([&] { inside = current_stream(kCpu1) == s; });
  s.synchronize();
  EXPECT_TRUE(inside);
}

TEST(Stream, EachCpuDeviceGetsItsShareOfIntraOpThreads) {
  const int total = get_num_threads();
  const int share = device_num_threads(kCpu1);
  EXPECT_GE(share, 1);
  EXPECT_EQ(share, std::max(1, total / 2));  // cpu:0 and cpu:1 in use
  int seen = 0;
  Stream s = Stream::create(kCpu1);
  s.submit([&] { seen = get_num_threads(); });
  s.synchronize();
  EXPECT_EQ(seen, share);
  set_device_num_threads(kCpu1, 3);
  s.submit([&] { seen = get_num_threads(); });
  s.synchronize();
  EXPECT_EQ(seen, 3);
  set_device_num_threads(kCpu1, 0);
  EXPECT_EQ(device_num_threads(kCpu1), share);
  EXPECT_LOOM_ERROR(set_device_num_threads(kCpu1, -1), "-1");
  EXPECT_LOOM_ERROR(device_num_threads(Device("cuda:0")), "CPU device");
}

TEST(Stream, CreatedStreamFinishesQueuedWorkWhenDropped) {
  std::atomic<int> ran{0};
  {
    Stream s = Stream::create(kCpu1);
    for (int i = 0; i < 10; ++i)
      s.submit([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ++ran;
      });
  }  // joins after draining
  EXPECT_EQ(ran.load(), 10);
  // A closure that holds the last handle to its own stream releases it on
  // the stream's worker; that must neither deadlock nor crash.
  std::atomic<bool> done{false};
  {
    Stream s = Stream::create(kCpu1);
    s.submit([s, &done] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done = true;
    });
  }
  for (int i = 0; i < 2000 && !done.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(done.load());
}

TEST(Stream, ConcurrentSubmittersKeepTheirOwnOrder) {
  Stream s = Stream::create(kCpu0);
  constexpr int kThreads = 4, kEach = 200;
  std::vector<std::vector<int>> seen(kThreads);  // written by the worker only
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) s.submit([&seen, t, i] { seen[t].push_back(i); });
    });
  for (auto& th : threads) th.join();
  s.synchronize();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), static_cast<size_t>(kEach));
    for (int i = 0; i < kEach; ++i) EXPECT_EQ(seen[t][i], i);
  }
}

TEST(Stream, ForkedChildGetsFreshDefaultStreams) {
  // The parent's cpu:1 default stream has a worker; the child's must be new.
  Stream::default_stream(kCpu1).submit([] {});
  Stream::default_stream(kCpu1).synchronize();
  EXPECT_EXIT(
      {
        int value = 0;
        Stream s = Stream::default_stream(kCpu1);
        s.submit([&] { value = 42; });
        s.synchronize();
        // _exit: the worker may still hold its reference to the marker event
        // for a moment after synchronize() returns, and LeakSanitizer, which
        // std::exit would run, cannot suspend the threads of a forked child
        // to see it (a false leak under --config=asan).
        _exit(value == 42 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Stream, ProcessExitWithBusyDefaultStreamsDoesNotHang) {
  // Fork a child that leaves work queued on process-lifetime streams and
  // returns from main-like code: it must exit promptly.
  EXPECT_EXIT(
      {
        Stream s = Stream::default_stream(Device("cpu:2"));
        s.submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(10)); });
        s.submit([] { std::this_thread::sleep_for(std::chrono::seconds(100)); });
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace loom
