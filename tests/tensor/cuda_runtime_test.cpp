// The CUDA runtime queries and the one proof kernel (cuda::vector_add),
// checked against loom's CPU add.  The GPU cases skip where no GPU is
// visible (and in builds without CUDA); the rest run everywhere.
#include <cstdlib>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/VectorAdd.h"
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

TEST(CudaRuntime, VectorAddMatchesCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible";
  Generator gen(7);
  // Sizes around the block (256) and grid (65535 blocks) limits.
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{257}, int64_t{100003},
                    int64_t{65535} * 256 + 3}) {
    Tensor a = randn({n}, kFloat32, &gen);
    Tensor b = randn({n}, kFloat32, &gen);
    Tensor expected = a + b;  // loom's CPU kernel is the oracle
    Tensor out = empty({n}, kFloat32);
    cuda::vector_add(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    // IEEE float addition is exact-rounded on both sides: demand equality.
    EXPECT_TRUE(AllClose(out, expected, 0, 0)) << "n = " << n;
  }
}

TEST(CudaRuntime, VectorAddChecksArguments) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible";
  float x = 1;
  EXPECT_LOOM_ERROR(cuda::vector_add(&x, &x, &x, -1), "n must be >= 0");
  EXPECT_LOOM_ERROR(cuda::vector_add(&x, &x, &x, 1, cuda::device_count()), "no CUDA device");
  cuda::vector_add(&x, &x, &x, 0);  // nothing to do
  EXPECT_EQ(x, 1.0f);
}

TEST(CudaRuntime, VectorAddWithoutGpuThrows) {
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is visible";
  float x = 1;
  EXPECT_LOOM_ERROR(cuda::vector_add(&x, &x, &x, 1), "cuda::vector_add");
}

}  // namespace
}  // namespace loom
