// Several emulated devices and a memory limit (tools/cuda/emu), as set by
// LOOM_CUDA_EMU_DEVICES=2 and LOOM_CUDA_EMU_MEMORY_MB=64 (BUILD's env): the
// device count and properties follow them; the current device is per host
// thread; streams, events and allocations belong to the device current when
// they were made; each device has its own 64 MiB (cudaMalloc past it fails
// with cudaErrorMemoryAllocation) and its own legacy stream; and
// cudaDeviceSynchronize waits for the current device only.
#include <thread>
#include <vector>

#include "tests/tools/cuda_emu/EmuTestUtil.h"

namespace {

using emu_test::DeviceBuffer;
using emu_test::Stream;
using emu_test::StreamGate;

constexpr size_t kMiB = size_t{1} << 20;

__global__ void set_kernel(int* flag, int value) { *flag = value; }

template <typename Kernel, typename... Args>
void launch(dim3 grid, dim3 block, cudaStream_t stream, Kernel kernel, Args&&... args) {
  loom_emu::launch(loom_emu::Config(grid, block, 0, stream), kernel, std::forward<Args>(args)...);
}

class DevicesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cudaSuccess, cudaSetDevice(0)); }
  void TearDown() override { cudaSetDevice(0); }
};

TEST_F(DevicesTest, CountAndPropertiesFollowTheEnvironment) {
  int count = 0;
  ASSERT_EQ(cudaSuccess, cudaGetDeviceCount(&count));
  EXPECT_EQ(2, count);
  for (int d = 0; d < 2; ++d) {
    cudaDeviceProp prop;
    ASSERT_EQ(cudaSuccess, cudaGetDeviceProperties(&prop, d));
    EXPECT_EQ(64 * kMiB, prop.totalGlobalMem) << "device " << d;
  }
  EXPECT_EQ(cudaErrorInvalidDevice, cudaSetDevice(2));
  int device = -1;
  ASSERT_EQ(cudaSuccess, cudaGetDevice(&device));
  EXPECT_EQ(0, device) << "a failed cudaSetDevice changed the device";
  cudaGetLastError();
}

TEST_F(DevicesTest, TheCurrentDeviceIsPerHostThread) {
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  int seen = -1, set_there = -1;
  std::thread([&] {
    cudaGetDevice(&seen);  // a new thread starts on device 0
    cudaSetDevice(1);
    cudaSetDevice(0);
    cudaGetDevice(&set_there);
  }).join();
  EXPECT_EQ(0, seen);
  EXPECT_EQ(0, set_there);
  int here = -1;
  ASSERT_EQ(cudaSuccess, cudaGetDevice(&here));
  EXPECT_EQ(1, here) << "another thread's cudaSetDevice changed this thread's device";
}

TEST_F(DevicesTest, StreamsEventsAndMemoryBelongToTheDeviceCurrentAtTheirMaking) {
  cudaEvent_t on0 = nullptr;
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&on0, cudaEventDisableTiming));
  Stream s0;
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  Stream s1;
  DeviceBuffer<int> flag(std::vector<int>{0});
  int device = -1;
  ASSERT_EQ(cudaSuccess, cudaStreamGetDevice(s0, &device));
  EXPECT_EQ(0, device);
  ASSERT_EQ(cudaSuccess, cudaStreamGetDevice(s1, &device));
  EXPECT_EQ(1, device);
  EXPECT_EQ(1, loom_emu::stream_device(s1));
  // The legacy stream is the current device's.
  ASSERT_EQ(cudaSuccess, cudaStreamGetDevice(nullptr, &device));
  EXPECT_EQ(1, device);
  EXPECT_EQ(1, loom_emu::stream_device(nullptr));

  cudaPointerAttributes a;
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, flag.get()));
  EXPECT_EQ(cudaMemoryTypeDevice, a.type);
  EXPECT_EQ(1, a.device);

  // An event records only on a stream of its own device.
  EXPECT_EQ(cudaErrorInvalidResourceHandle, cudaEventRecord(on0, s1));
  cudaGetLastError();
  EXPECT_EQ(cudaSuccess, cudaEventRecord(on0, s0)) << "a device-0 stream, whatever is current";

  // Work on a device-1 stream runs while device 0 is current.
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  launch(1, 1, s1, set_kernel, flag.get(), 5);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s1));
  int host = 0;
  ASSERT_EQ(cudaSuccess, cudaMemcpy(&host, flag.get(), sizeof host, cudaMemcpyDeviceToHost));
  EXPECT_EQ(5, host);
  cudaEventDestroy(on0);
}

TEST_F(DevicesTest, EachDeviceHasItsOwnMemoryLimit) {
  size_t free0 = 0, total = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free0, &total));
  EXPECT_EQ(64 * kMiB, total);
  void* first = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&first, 40 * kMiB));
  size_t free1 = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - 40 * kMiB, free1);

  void* second = nullptr;
  EXPECT_EQ(cudaErrorMemoryAllocation, cudaMalloc(&second, 40 * kMiB));
  EXPECT_EQ(nullptr, second);
  EXPECT_EQ(cudaErrorMemoryAllocation, cudaGetLastError());
  EXPECT_EQ(cudaSuccess, cudaGetLastError()) << "out of memory is not sticky";
  void* fits = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&fits, free1)) << "exactly what is left";
  ASSERT_EQ(cudaSuccess, cudaFree(fits));

  // Device 1 has its own 64 MiB.
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  size_t free_on_1 = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_on_1, &total));
  EXPECT_EQ(64 * kMiB, free_on_1);
  ASSERT_EQ(cudaSuccess, cudaMalloc(&second, 40 * kMiB));
  cudaPointerAttributes a;
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, second));
  EXPECT_EQ(1, a.device);

  // cudaFree returns memory to the device it came from, whichever is current.
  ASSERT_EQ(cudaSuccess, cudaFree(first));
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_on_1, &total));
  EXPECT_EQ(24 * kMiB, free_on_1);
  ASSERT_EQ(cudaSuccess, cudaFree(second));
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free1, &total));
  EXPECT_EQ(free0, free1);
}

TEST_F(DevicesTest, DeviceSynchronizeWaitsForTheCurrentDeviceOnly) {
  Stream held;  // on device 0
  StreamGate gate(held);
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  Stream s1;
  DeviceBuffer<int> flag(std::vector<int>{0});
  launch(1, 1, s1, set_kernel, flag.get(), 1);
  // A device-0 stream still held would make this hang if it waited for device 0.
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  EXPECT_EQ(cudaSuccess, cudaStreamQuery(s1));
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(held));
  cudaGetLastError();
  gate.open();
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  EXPECT_EQ(cudaSuccess, cudaStreamQuery(held));
}

}  // namespace
