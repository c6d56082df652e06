// CUDA streams and events behind loom's Stream API (tensor/Stream.h), the
// stream-aware caching allocator (record_stream) and the cross-stream copy
// contract (tensor/cuda/Copy.cpp).  Tagged gpu; every case skips itself
// where no GPU is visible.
//
// Ordering is checked with a long kernel (cuda::sleep_cycles, ~0.1 s) queued
// ahead of the work that writes a tensor: a consumer that did not wait for
// the right event would read the old values.
#include "tensor/Stream.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tensor/cuda/StreamEvent.h"
#include "tensor/native/Copy.h"
#include "tests/CudaTestUtil.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing_cuda::CudaTest;
using testing_cuda::kGpu;

constexpr int64_t kLong = 200 * 1000 * 1000;  // GPU clock cycles: ~0.1 s
constexpr int64_t kN = 1 << 16;

// Queues the long kernel on `stream`.
void sleep_on(const Stream& stream) {
  cuda::sleep_cycles(kLong, stream.device().index, stream.native_handle());
}

// Every element of t (any device) equals v.
::testing::AssertionResult AllEqual(const Tensor& t, double v) {
  const std::vector<double> values = t.cpu().to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] != v)
      return ::testing::AssertionFailure() << "element " << i << " is " << values[i]
                                           << ", expected " << v;
  return ::testing::AssertionSuccess();
}

class CudaStream : public CudaTest {};

TEST_F(CudaStream, DefaultCopyAndCreatedStreamsAndTheirHandles) {
  const Stream def = Stream::default_stream(kGpu);
  EXPECT_EQ(def.native_handle(), 0u);  // the legacy default stream
  EXPECT_EQ(def, Stream::default_stream(kGpu));
  EXPECT_EQ(def.name(), "cuda:0 default stream");
  const Stream copy = Stream::copy_stream(kGpu);
  EXPECT_NE(copy.native_handle(), 0u);
  EXPECT_EQ(copy, Stream::copy_stream(kGpu));
  EXPECT_NE(copy, def);
  const Stream a = Stream::create(kGpu), b = Stream::create(kGpu);
  EXPECT_NE(a.native_handle(), 0u);
  EXPECT_NE(a.native_handle(), b.native_handle());
  EXPECT_NE(a.native_handle(), copy.native_handle());
  EXPECT_EQ(a.device(), kGpu);
  EXPECT_EQ(current_stream(kGpu), def);
  EXPECT_EQ(cuda::current_stream_handle(0), 0u);
}

TEST_F(CudaStream, PrioritiesAreCheckedAgainstTheDevicesRange) {
  const Stream::PriorityRange range = Stream::priority_range(kGpu);
  EXPECT_LE(range.greatest, range.least);
  const Stream urgent = Stream::create(kGpu, range.greatest);
  EXPECT_EQ(urgent.priority(), range.greatest);
  EXPECT_EQ(Stream::create(kGpu).priority(), 0);
  EXPECT_LOOM_ERROR(Stream::create(kGpu, range.least + 1), "Stream::create", "outside the range",
                    "cuda:0");
  EXPECT_LOOM_ERROR(Stream::create(kGpu, range.greatest - 1), "outside the range");
}

TEST_F(CudaStream, CreatedStreamsArePooledNotDestroyed) {
  const int p = Stream::priority_range(kGpu).greatest;
  uint64_t handle = 0;
  {
    const Stream s = Stream::create(kGpu, p);
    handle = s.native_handle();
    sleep_on(s);  // dropped while busy: its work still finishes
  }
  const Stream again = Stream::create(kGpu, p);
  EXPECT_EQ(again.native_handle(), handle);
  again.synchronize();
}

TEST_F(CudaStream, EventOrdersALongKernelAndItsWriteBeforeAnotherStreamsCopy) {
  const Stream a = Stream::create(kGpu), b = Stream::create(kGpu);
  Tensor x = zeros({kN}, kGpu);
  cuda::synchronize(0);
  {
    StreamGuard guard(a);
    sleep_on(a);
    x.fill_(3);  // queued behind ~0.1 s of spinning on a
  }
  const Event written = a.record();
  EXPECT_FALSE(written.query());
  EXPECT_FALSE(a.query());
  Tensor y;
  {
    StreamGuard guard(b);
    b.wait_event(written);
    y = x * 2;  // allocated and computed on b
  }
  cuda::record_stream(x.storage(), b.native_handle());
  // The copy to the host runs on b too (b is current in the guard).
  Tensor host;
  {
    StreamGuard guard(b);
    host = y.cpu();
  }
  EXPECT_TRUE(AllEqual(host, 6));
  EXPECT_TRUE(written.query());
  a.synchronize();
  EXPECT_TRUE(a.query());
}

TEST_F(CudaStream, ElapsedTimeNeedsTimingEventsOfCudaStreams) {
  const Stream a = Stream::create(kGpu);
  const Event start = a.record(/*enable_timing=*/true);
  sleep_on(a);
  const Event end = a.record(/*enable_timing=*/true);
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GT(start.elapsed_ms(end), 1.0);
  const Event untimed = a.record();
  untimed.synchronize();
  EXPECT_LOOM_ERROR(start.elapsed_ms(untimed), "elapsed_ms", "enable_timing");
  const Stream cpu = Stream::create(Device(kCPU, 1));
  const Event host = cpu.record();
  host.synchronize();
  EXPECT_LOOM_ERROR(start.elapsed_ms(host), "elapsed_ms", "CPU");
}

TEST_F(CudaStream, GuardsNestAndSetTheCurrentHandlePerThread) {
  const Stream a = Stream::create(kGpu), b = Stream::create(kGpu);
  {
    StreamGuard ga(a);
    EXPECT_EQ(current_stream(kGpu), a);
    EXPECT_EQ(cuda::current_stream_handle(0), a.native_handle());
    {
      StreamGuard gb(b);
      EXPECT_EQ(current_stream(kGpu), b);
      EXPECT_EQ(cuda::current_stream_handle(0), b.native_handle());
    }
    EXPECT_EQ(cuda::current_stream_handle(0), a.native_handle());
    uint64_t other_thread = 1;
    std::thread t([&] { other_thread = cuda::current_stream_handle(0); });
    t.join();
    EXPECT_EQ(other_thread, 0u);  // guards are per thread
  }
  EXPECT_EQ(cuda::current_stream_handle(0), 0u);
  EXPECT_EQ(current_stream(kGpu), Stream::default_stream(kGpu));
}

TEST_F(CudaStream, SubmittedClosuresRunWithTheStreamCurrentAndQueueOnIt) {
  const Stream a = Stream::create(kGpu);
  std::atomic<uint64_t> seen{1};
  std::atomic<int> device{-1};
  Tensor x = zeros({kN}, kGpu);
  cuda::synchronize(0);
  Tensor y;
  a.submit([&] {
    seen = cuda::current_stream_handle(0);
    device = cuda::current_device();
    sleep_on(current_stream(kGpu));
    y = x + 5;  // on a, behind the sleep
  });
  const Event done = a.record();
  done.synchronize();  // the closure ran and the GPU passed it
  EXPECT_EQ(seen.load(), a.native_handle());
  EXPECT_EQ(device.load(), 0);
  EXPECT_TRUE(AllEqual(y, 5));
  // Errors inside a closure come back through synchronize, naming the stream.
  a.submit([] { LOOM_FAIL("stage failed"); });
  EXPECT_LOOM_ERROR(a.synchronize(), "stage failed", a.name());
  a.synchronize();
}

TEST_F(CudaStream, CpuAndCudaEventsWaitOnEachOther) {
  const Stream gpu = Stream::create(kGpu);
  const Stream cpu = Stream::create(Device(kCPU, 1));
  // A CUDA stream waiting on a CPU event: a host-side wait.
  std::atomic<bool> cpu_done{false};
  cpu.submit([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cpu_done = true;
  });
  gpu.wait_event(cpu.record());
  std::atomic<bool> seen_done{false};
  gpu.submit([&] { seen_done = cpu_done.load(); });
  gpu.synchronize();
  EXPECT_TRUE(seen_done.load());
  // A CPU stream waiting on a CUDA event: its worker waits for the GPU.
  sleep_on(gpu);
  const Event slept = gpu.record();
  std::atomic<bool> gpu_was_done{false};
  cpu.wait_event(slept);
  cpu.submit([&] { gpu_was_done = slept.query(); });
  cpu.synchronize();
  EXPECT_TRUE(gpu_was_done.load());
}

TEST_F(CudaStream, RecordStreamKeepsABlockFromReuseUntilTheOtherStreamIsDone) {
  const Stream a = Stream::create(kGpu), b = Stream::create(kGpu);
  StreamGuard on_a(a);
  Tensor t = full({kN}, 1.0, kGpu);  // a block of a's pool
  void* ptr = t.data_ptr();
  b.wait_event(a.record());
  Tensor out;
  {
    StreamGuard on_b(b);
    sleep_on(b);
    out = t * 2;  // reads t on b, ~0.1 s from now
  }
  cuda::record_stream(t.storage(), b.native_handle());
  const int64_t pending = cuda::memory_stats(0).num_pending_frees;
  t = Tensor();  // freed while b may still read it
  EXPECT_EQ(cuda::memory_stats(0).num_pending_frees, pending + 1);
  Tensor u = full({kN}, 7.0, kGpu);  // same size, same stream: must not get ptr
  EXPECT_NE(u.data_ptr(), ptr);
  {
    StreamGuard on_b(b);
    EXPECT_TRUE(AllEqual(out, 2));  // not clobbered by u's 7s
  }
  b.synchronize();
  a.synchronize();
}

TEST_F(CudaStream, HostToDeviceNonBlockingCopyIsOrderedWithTheCurrentStream) {
  const Stream a = Stream::create(kGpu);
  Tensor pinned = cuda::pinned_empty({kN});
  pinned.fill_(4);
  StreamGuard on_a(a);
  sleep_on(a);
  Tensor d = pinned.to(kGpu, /*non_blocking=*/true);  // on the copy stream
  pinned = Tensor();  // recorded on the copy stream: safe to drop now
  Tensor e = d + 1;   // on a, after the copy's event
  EXPECT_TRUE(AllEqual(e, 5));
}

TEST_F(CudaStream, DeviceToHostNonBlockingCopyIsOrderedAfterTheProducer) {
  const Stream a = Stream::create(kGpu);
  StreamGuard on_a(a);
  Tensor d = zeros({kN}, kGpu);
  sleep_on(a);
  d.fill_(9);  // behind the sleep, on a
  Tensor pinned = cuda::pinned_empty({kN});
  pinned.fill_(0);
  native::copy_(pinned, d, /*non_blocking=*/true);
  a.synchronize();  // the current stream waits on the copy's event
  EXPECT_TRUE(AllEqual(pinned, 9));
}

TEST_F(CudaStream, SameDeviceCopyOnASecondStream) {
  const Stream a = Stream::create(kGpu), b = Stream::create(kGpu);
  Tensor x = zeros({4, kN / 4}, kGpu);
  cuda::synchronize(0);
  {
    StreamGuard on_a(a);
    sleep_on(a);
    x.fill_(2);
  }
  b.wait_event(a.record());
  Tensor y;
  {
    StreamGuard on_b(b);
    y = x.t().contiguous();  // strided copy kernel on b
  }
  cuda::record_stream(x.storage(), b.native_handle());
  x = Tensor();
  StreamGuard on_b(b);
  EXPECT_TRUE(AllEqual(y, 2));
}

TEST_F(CudaStream, CrossDeviceCopyWaitsForTheProducersStream) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const Device gpu1(kCUDA, 1);
  const Stream a = Stream::create(kGpu);
  Tensor x = zeros({kN}, kGpu);
  cuda::synchronize(0);
  Tensor y;
  {
    StreamGuard on_a(a);
    sleep_on(a);
    x.fill_(8);
    y = x.to(gpu1);  // on cuda:1's copy stream, after an event on a
  }
  x = Tensor();  // recorded on the copy stream: safe
  EXPECT_TRUE(AllEqual(y * 1, 8));  // cuda:1's current stream waited on the copy
  // And back, from cuda:1's default stream to a created stream on cuda:0.
  Tensor z;
  {
    StreamGuard on_a(a);
    z = y.to(kGpu);
    EXPECT_TRUE(AllEqual(z, 8));
  }
}

}  // namespace
}  // namespace loom
