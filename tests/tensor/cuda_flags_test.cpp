// tensor/CudaFlags.h: the switches start at PyTorch's defaults and keep what
// they are set to.  Plain C++ (no GPU needed); the GPU tests check that the
// kernels honour them (cuda_gemm_test, cuda_conv_test).
#include <gtest/gtest.h>

#include "tensor/CudaFlags.h"

namespace loom {
namespace {

// PyTorch's: torch.backends.cuda.matmul.allow_tf32 False (>= 1.12),
// allow_fp16/bf16_reduced_precision_reduction True, cudnn.allow_tf32 True,
// cudnn.benchmark False.
TEST(CudaFlags, DefaultsArePyTorchs) {
  EXPECT_FALSE(cuda::matmul_allow_tf32());
  EXPECT_TRUE(cuda::matmul_allow_fp16_reduced_precision_reduction());
  EXPECT_TRUE(cuda::matmul_allow_bf16_reduced_precision_reduction());
  EXPECT_TRUE(cuda::cudnn_allow_tf32());
  EXPECT_FALSE(cuda::cudnn_benchmark());
}

TEST(CudaFlags, EachSwitchKeepsItsOwnValue) {
  cuda::set_matmul_allow_fp16_reduced_precision_reduction(false);
  EXPECT_FALSE(cuda::matmul_allow_fp16_reduced_precision_reduction());
  EXPECT_TRUE(cuda::matmul_allow_bf16_reduced_precision_reduction());
  cuda::set_matmul_allow_bf16_reduced_precision_reduction(false);
  EXPECT_FALSE(cuda::matmul_allow_bf16_reduced_precision_reduction());
  cuda::set_matmul_allow_fp16_reduced_precision_reduction(true);
  EXPECT_TRUE(cuda::matmul_allow_fp16_reduced_precision_reduction());
  EXPECT_FALSE(cuda::matmul_allow_bf16_reduced_precision_reduction());
  cuda::set_matmul_allow_bf16_reduced_precision_reduction(true);
  cuda::set_matmul_allow_tf32(true);
  EXPECT_TRUE(cuda::matmul_allow_tf32());
  EXPECT_TRUE(cuda::cudnn_allow_tf32());
  cuda::set_matmul_allow_tf32(false);
}

}  // namespace
}  // namespace loom
