// The kernel profile on a GPU (tensor/native/KernelProfile.h): a call on a
// CUDA device is charged the GPU time of the work it queued (the device is
// synchronized around it), not the microseconds its launch takes.  Tagged
// gpu; skips itself where no GPU is visible.
#include <chrono>

#include "tensor/native/KernelProfile.h"
#include "tensor/native/Index.h"
#include "tensor/native/Linalg.h"
#include "tests/CudaTestUtil.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing_cuda::kGpu;

class CudaKernelProfile : public testing_cuda::CudaTest {};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST_F(CudaKernelProfile, ChargesACallItsGpuTime) {
  // float64 products of 2048 x 2048: milliseconds of GPU work each, launched
  // in microseconds.
  const Tensor a = testing_cuda::sample(kFloat64, {2048, 2048}, 1).to(kGpu);
  (void)native::mm(a, a);
  cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) (void)native::mm(a, a);
  cuda::synchronize();
  const double gpu = seconds_since(t0);

  native::start_kernel_profile();
  for (int i = 0; i < 5; ++i) (void)native::mm(a, a);
  const std::vector<native::KernelStat> stats = native::stop_kernel_profile();
  double gemm = -1;
  for (const native::KernelStat& s : stats)
    if (s.name == "gemm") gemm = s.seconds;
  ASSERT_GE(gemm, 0) << "no gemm calls in the profile";
  EXPECT_GE(gemm, 0.8 * gpu) << "5 products: " << gpu << " s on the GPU, " << gemm
                             << " s in the profile";
}

// The wait at the end of a profiled call reports what any wait would: a
// failed index check surfaces from the call itself (not as std::terminate
// from the timer's destructor), once, and the profile goes on.
TEST_F(CudaKernelProfile, AFailedCheckSurfacesFromTheProfiledCall) {
  const Tensor x = ones({3, 4}, kGpu);
  const Tensor bad = tensor<int64_t>({0, 4}).to(kGpu);
  native::start_kernel_profile();
  EXPECT_LOOM_ERROR(native::index_select(x, 1, bad), "index_select: index 4 is out of bounds");
  EXPECT_NO_THROW(cuda::synchronize());
  EXPECT_EQ(native::index_select(x, 1, tensor<int64_t>({3}).to(kGpu)).sum().item<double>(), 3.0);
  const std::vector<native::KernelStat> stats = native::stop_kernel_profile();
  bool timed = false;
  for (const native::KernelStat& s : stats) timed = timed || s.name == "index_select";
  EXPECT_TRUE(timed);
}

}  // namespace
}  // namespace loom
