// The CUDA runtime queries (devices, properties, current device, guards,
// errors) and a first kernel through the dispatch slots (a + b on the GPU),
// checked against loom's CPU add.  The GPU cases skip where no GPU is
// visible (and in builds without CUDA); the rest run everywhere.
#include <cstdlib>
#include <thread>

#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

TEST(CudaRuntime, QueriesAgree) {
  const int n = cuda::device_count();
  EXPECT_GE(n, 0);
  EXPECT_EQ(cuda::is_available(), n > 0);
  if (!cuda::built_with_cuda()) {
    EXPECT_EQ(n, 0);
  }
#ifdef LOOM_WITH_CUDA
  EXPECT_TRUE(cuda::built_with_cuda());
#else
  EXPECT_FALSE(cuda::built_with_cuda());
#endif
}

TEST(CudaRuntime, DevicePropertiesArePlausible) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible";
  for (int i = 0; i < cuda::device_count(); ++i) {
    const cuda::DeviceProperties p = cuda::get_device_properties(i);
    EXPECT_EQ(p.index, i);
    EXPECT_FALSE(p.name.empty());
    EXPECT_GT(p.total_memory, size_t{1} << 30);
    EXPECT_GE(p.major, 7);  // loom builds sm_80 / sm_90
    EXPECT_GE(p.minor, 0);
    EXPECT_GT(p.multiprocessor_count, 0);
    const cuda::MemoryInfo m = cuda::memory_info(i);
    EXPECT_EQ(m.total, p.total_memory);
    EXPECT_LE(m.free, m.total);
  }
}

TEST(CudaRuntime, CurrentDeviceIsPerThreadAndGuarded) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible";
  const int last = cuda::device_count() - 1;
  cuda::set_device(0);
  EXPECT_EQ(cuda::current_device(), 0);
  {
    cuda::DeviceGuard guard(last);
    EXPECT_EQ(cuda::current_device(), last);
    EXPECT_EQ(guard.original_device(), 0);
    int seen_on_other_thread = -1;
    std::thread([&] { seen_on_other_thread = cuda::current_device(); }).join();
    EXPECT_EQ(seen_on_other_thread, 0);  // a fresh thread starts on device 0
  }
  EXPECT_EQ(cuda::current_device(), 0);
  cuda::synchronize();
  cuda::synchronize(last);
}

TEST(CudaRuntime, BadDeviceIndexNamesIndexAndCount) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible";
  const int n = cuda::device_count();
  const std::string count = std::to_string(n) + " CUDA device";
  EXPECT_LOOM_ERROR(cuda::get_device_properties(n), "cuda::get_device_properties",
                    "invalid CUDA device index " + std::to_string(n), count);
  EXPECT_LOOM_ERROR(cuda::set_device(-1), "cuda::set_device", "invalid CUDA device index -1",
                    count);
  EXPECT_LOOM_ERROR(cuda::DeviceGuard(n + 3), "cuda::DeviceGuard", count);
  EXPECT_LOOM_ERROR(cuda::synchronize(n), "cuda::synchronize", count);
  EXPECT_EQ(cuda::current_device(), 0);  // failed calls changed nothing
}

TEST(CudaRuntime, AddMatchesCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible";
  Generator gen(7);
  // Sizes around the block (256) and grid (65535 blocks) limits.
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{257}, int64_t{100003},
                    int64_t{65535} * 256 + 3}) {
    Tensor a = randn({n}, kFloat32, &gen);
    Tensor b = randn({n}, kFloat32, &gen);
    Tensor expected = a + b;  // loom's CPU kernel is the oracle
    Tensor out = (a.to("cuda:0") + b.to("cuda:0")).to(kCPU);
    // IEEE float addition is exact-rounded on both sides: demand equality.
    EXPECT_TRUE(AllClose(out, expected, 0, 0)) << "n = " << n;
  }
}

TEST(CudaRuntime, CudaTensorWithoutGpuThrows) {
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is visible";
  EXPECT_LOOM_ERROR(ones({1}).to(Device("cuda:0")), "CUDA device 0", "not available");
}

}  // namespace
}  // namespace loom
