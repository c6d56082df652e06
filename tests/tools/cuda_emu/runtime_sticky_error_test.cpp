// Failed work in the CUDA emulator (tools/cuda/emu) is a sticky error of its
// device, as on a GPU.  A kernel whose threads wait at a barrier that the
// others never reach (a deadlock on a GPU), a kernel thread that throws,
// library work (loom_emu::enqueue) that throws, and a cuBLAS product given a
// null device pointer (accepted by the call, a fault when it runs) each make
// their device return cudaErrorLaunchFailure from then on -- from
// synchronisation, cudaGetLastError (which cannot clear it), launches,
// copies, cudaMalloc, event records and waits -- and run nothing more, while
// the process's other devices carry on.
//
// A sticky error lasts for the rest of the process, so this binary runs with
// five emulated devices (LOOM_CUDA_EMU_DEVICES=5, set in BUILD): each test
// breaks a device of its own (0 to 3) and checks that device 4, never
// broken, still works.
#include <cublas_v2.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "tests/tools/cuda_emu/EmuTestUtil.h"

namespace {

using emu_test::DeviceBuffer;
using emu_test::Stream;

constexpr int kHealthyDevice = 4;

template <typename Kernel, typename... Args>
void launch(dim3 grid, dim3 block, cudaStream_t stream, Kernel kernel, Args&&... args) {
  loom_emu::launch(loom_emu::Config(grid, block, 0, stream), kernel, std::forward<Args>(args)...);
}

__global__ void set_kernel(int* flag, int value) { *flag = value; }

// Lanes 0-15 wait at __syncthreads; lanes 16-31 wait at __syncwarp for them.
__global__ void deadlock_kernel(int* reached) {
  if (threadIdx.x < 16)
    __syncthreads();
  else
    __syncwarp();
  *reached = 1;
}

__global__ void throwing_kernel(int* out) {
  if (threadIdx.x == 5) throw std::runtime_error("thread 5 fails");
  out[threadIdx.x] = 1;
}

// What a test makes on its device before breaking it: one int of device
// memory (0) and an instantiated graph of one kernel that sets it to 7.
struct MadeBefore {
  explicit MadeBefore(cudaStream_t stream) : scratch(std::vector<int>{0}) {
    EXPECT_EQ(cudaSuccess, cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    launch(1, 1, stream, set_kernel, scratch.get(), 7);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaSuccess, cudaStreamEndCapture(stream, &graph));
    EXPECT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
    cudaGraphDestroy(graph);
  }
  MadeBefore(const MadeBefore&) = delete;
  MadeBefore& operator=(const MadeBefore&) = delete;
  ~MadeBefore() { cudaGraphExecDestroy(exec); }

  DeviceBuffer<int> scratch;
  cudaGraphExec_t exec = nullptr;
};

// The state every broken device must be in: every call that reports errors
// returns it, and nothing more runs.
void expect_broken(int device, cudaStream_t stream, const MadeBefore& before) {
  ASSERT_EQ(cudaSuccess, cudaSetDevice(device));
  EXPECT_EQ(cudaErrorLaunchFailure, cudaStreamSynchronize(stream));
  EXPECT_EQ(cudaErrorLaunchFailure, cudaDeviceSynchronize());
  EXPECT_EQ(cudaErrorLaunchFailure, cudaGetLastError());
  EXPECT_EQ(cudaErrorLaunchFailure, cudaGetLastError()) << "cudaGetLastError cleared it";
  EXPECT_EQ(cudaErrorLaunchFailure, cudaStreamQuery(stream));

  void* more = nullptr;
  EXPECT_EQ(cudaErrorLaunchFailure, cudaMalloc(&more, 64));
  EXPECT_EQ(nullptr, more);
  int* scratch = before.scratch.get();
  launch(1, 1, stream, set_kernel, scratch, 7);
  EXPECT_EQ(cudaErrorLaunchFailure, cudaGetLastError()) << "a launch on a broken device";
  EXPECT_EQ(cudaErrorLaunchFailure, cudaGraphLaunch(before.exec, stream));
  EXPECT_EQ(cudaErrorLaunchFailure, cudaMemsetAsync(scratch, 7, sizeof(int), stream));
  int host = 0;
  EXPECT_EQ(cudaErrorLaunchFailure,
            cudaMemcpyAsync(&host, scratch, sizeof(int), cudaMemcpyDeviceToHost, stream));
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  EXPECT_EQ(cudaErrorLaunchFailure, cudaEventRecord(event, stream));
  EXPECT_EQ(cudaErrorLaunchFailure, cudaStreamWaitEvent(stream, event, 0));
  cudaEventDestroy(event);
  // Work a library queues is dropped too.
  bool ran = false;
  loom_emu::enqueue(stream, [&ran] { ran = true; });
  EXPECT_EQ(cudaErrorLaunchFailure, cudaStreamSynchronize(stream));
  EXPECT_FALSE(ran);
  int value = -1;
  std::memcpy(&value, scratch, sizeof value);  // device memory is host memory
  EXPECT_EQ(0, value) << "a kernel, graph or memset ran on a broken device";
}

void expect_healthy(int device) {
  ASSERT_EQ(cudaSuccess, cudaSetDevice(device));
  cudaGetLastError();  // the thread's last error, from the broken device
  EXPECT_EQ(cudaSuccess, cudaGetLastError());
  Stream s;
  DeviceBuffer<int> flag(std::vector<int>{0});
  launch(1, 1, s, set_kernel, flag.get(), 7);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(std::vector<int>{7}, flag.download());
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
}

TEST(StickyErrorTest, ABarrierSomeThreadsNeverReachFailsTheDeviceForGood) {
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  Stream s, other;
  MadeBefore before(s);
  DeviceBuffer<int> reached(std::vector<int>{0}), done(std::vector<int>{0});
  launch(1, 1, other, set_kernel, done.get(), 1);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(other));
  launch(1, 32, s, deadlock_kernel, reached.get());
  EXPECT_EQ(cudaSuccess, cudaGetLastError()) << "the launch itself is valid";
  expect_broken(0, s, before);
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  EXPECT_EQ(cudaErrorLaunchFailure, cudaStreamSynchronize(other)) << "the whole device is broken";
  int host[2] = {-1, -1};
  std::memcpy(&host[0], reached.get(), sizeof(int));  // device memory is host memory
  std::memcpy(&host[1], done.get(), sizeof(int));
  EXPECT_EQ(0, host[0]) << "a thread went past the barrier";
  EXPECT_EQ(1, host[1]) << "work finished before the failure stays done";
  expect_healthy(kHealthyDevice);
}

TEST(StickyErrorTest, AKernelThreadThatThrowsFailsTheDevice) {
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  Stream s;
  MadeBefore before(s);
  DeviceBuffer<int> out(std::vector<int>(32, 0));
  launch(1, 32, s, throwing_kernel, out.get());
  expect_broken(1, s, before);
  expect_healthy(kHealthyDevice);
}

TEST(StickyErrorTest, LibraryWorkThatThrowsFailsTheDevice) {
  ASSERT_EQ(cudaSuccess, cudaSetDevice(2));
  Stream s;
  MadeBefore before(s);
  loom_emu::enqueue(s, [] { throw std::runtime_error("a library call's work fails"); });
  expect_broken(2, s, before);
  expect_healthy(kHealthyDevice);
}

TEST(StickyErrorTest, ACublasProductOnANullDevicePointerFailsTheDevice) {
  ASSERT_EQ(cudaSuccess, cudaSetDevice(3));
  Stream s;
  MadeBefore before(s);
  DeviceBuffer<float> b(std::vector<float>(4, 1)), c(std::vector<float>(4, 0));
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasCreate(&handle));
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasSetStream(handle, s));
  const float one = 1, zero = 0;
  EXPECT_EQ(CUBLAS_STATUS_SUCCESS, cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one,
                                               nullptr, 2, b.get(), 2, &zero, c.get(), 2))
      << "a null A is accepted at the call";
  expect_broken(3, s, before);
  cublasDestroy(handle);
  expect_healthy(kHealthyDevice);
}

}  // namespace
