// What loom says when CUDA cannot be used: built without CUDA, or built with
// it on a machine with no visible GPU.  Untagged, so CI runs it everywhere;
// every case skips itself where a GPU is visible (cuda_*_test.cpp cover that).
#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

class CudaUnavailable : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is visible";
  }
  // The reason every error should give.
  static std::string why() {
    return cuda::built_with_cuda() ? "no CUDA device is visible" : "loom was built without CUDA";
  }
};

TEST_F(CudaUnavailable, QueriesReportNoDevice) {
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_FALSE(cuda::is_available());
  EXPECT_FALSE(cuda::is_pinned(nullptr));
  EXPECT_EQ(cuda::pinned_memory_stats().num_allocs, 0);
  cuda::empty_cache();  // nothing to do, no error
}

TEST_F(CudaUnavailable, DeviceFunctionsThrowSayingWhy) {
  EXPECT_LOOM_ERROR(cuda::get_device_properties(0), "cuda::get_device_properties",
                    "CUDA device 0", why());
  EXPECT_LOOM_ERROR(cuda::set_device(1), "cuda::set_device", "CUDA device 1", why());
  EXPECT_LOOM_ERROR(cuda::synchronize(), "cuda::synchronize", why());
  EXPECT_LOOM_ERROR(cuda::memory_info(0), "cuda::memory_info", why());
  EXPECT_LOOM_ERROR(cuda::DeviceGuard(0), "cuda::DeviceGuard", why());
  EXPECT_LOOM_ERROR(cuda::current_device(), "cuda::current_device");
  EXPECT_LOOM_ERROR(cuda::memory_stats(0), "cuda::memory_stats", why());
  EXPECT_LOOM_ERROR(cuda::pinned_empty({2, 3}), "pinned");
}

TEST_F(CudaUnavailable, TensorsCannotGoToCuda) {
  Tensor x = arange(6, kFloat32).view({2, 3});
  EXPECT_FALSE(x.is_pinned());
  EXPECT_LOOM_ERROR(x.to(Device("cuda:0")), "CUDA device 0", why());
  EXPECT_LOOM_ERROR(x.cuda(), "CUDA device 0", why());
  EXPECT_LOOM_ERROR(empty({2}, Device("cuda:0")), "CUDA");
  EXPECT_LOOM_ERROR(zeros({2}, Device("cuda:1")), "CUDA");
}

TEST_F(CudaUnavailable, CopyIntoForeignCudaTensorThrows) {
  // A tensor claiming to be on cuda:0 (from_blob cannot check the pointer):
  // copies refuse it before touching the memory, other ops too.
  float fake[4] = {0, 0, 0, 0};
  Tensor on_gpu = from_blob(fake, {4}, TensorOptions(kFloat32).device(Device("cuda:0")));
  Tensor x = ones({4});
  EXPECT_LOOM_ERROR(on_gpu.copy_(x), "copy_", "CUDA device 0", why());
  EXPECT_LOOM_ERROR(x.copy_(on_gpu), "copy_", "CUDA device 0", why());
  // Ops with a CUDA kernel check the device first.
  EXPECT_LOOM_ERROR(on_gpu.sum(), "sum", "CUDA device 0", why());
  EXPECT_LOOM_ERROR(on_gpu.exp(), "exp", "CUDA device 0", why());
  EXPECT_LOOM_ERROR(on_gpu + on_gpu, "add", "CUDA device 0", why());
  EXPECT_LOOM_ERROR(on_gpu.max(), "max", "CUDA device 0", why());
  EXPECT_LOOM_ERROR(on_gpu.softmax(0), "softmax", "CUDA device 0", why());
  EXPECT_EQ(fake[0], 0.0f);
}

}  // namespace
}  // namespace loom
