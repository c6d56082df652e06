// LOOM_CUDA_CHECK (tensor/cuda/Check.h) for each CUDA-family status type.
// Formatting an error needs the libraries but no GPU, so this runs in CI on
// any machine with the toolkit; in a build without CUDA it skips.
#include "tests/TestUtil.h"

#ifdef LOOM_WITH_CUDA
#include "tensor/cuda/Check.h"
#endif

namespace loom {
namespace {

#ifdef LOOM_WITH_CUDA

TEST(CudaCheck, SuccessDoesNothing) {
  LOOM_CUDA_CHECK(cudaSuccess);
  LOOM_CUDA_CHECK(CUBLAS_STATUS_SUCCESS);
  LOOM_CUDA_CHECK(CUDNN_STATUS_SUCCESS);
  LOOM_CUDA_CHECK(ncclSuccess);
}

TEST(CudaCheck, CudaRuntimeErrorNamesCallFileLineAndReason) {
  EXPECT_LOOM_ERROR(LOOM_CUDA_CHECK(cudaErrorInvalidValue), "CUDA error at ",
                    "cuda_check_test.cpp:", "in cudaErrorInvalidValue",
                    "cudaErrorInvalidValue (invalid argument)");
}

// A call expression, as real code wraps: the text appears in the message.
cublasStatus_t fake_cublas_call(int) { return CUBLAS_STATUS_NOT_INITIALIZED; }
cudnnStatus_t fake_cudnn_call() { return CUDNN_STATUS_BAD_PARAM; }
ncclResult_t fake_nccl_call() { return ncclInvalidArgument; }

TEST(CudaCheck, EveryLibraryHasItsOwnName) {
  EXPECT_LOOM_ERROR(LOOM_CUDA_CHECK(fake_cublas_call(42)), "cuBLAS error at ",
                    "in fake_cublas_call(42)", "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_LOOM_ERROR(LOOM_CUDA_CHECK(fake_cudnn_call()), "cuDNN error at ",
                    "in fake_cudnn_call()", "CUDNN_STATUS_BAD_PARAM");
  EXPECT_LOOM_ERROR(LOOM_CUDA_CHECK(fake_nccl_call()), "NCCL error at ", "in fake_nccl_call()",
                    "invalid argument");
}

TEST(CudaCheck, EvaluatesTheCallOnce) {
  int calls = 0;
  auto call = [&] {
    ++calls;
    return cudaSuccess;
  };
  LOOM_CUDA_CHECK(call());
  EXPECT_EQ(calls, 1);
}

#else

TEST(CudaCheck, NeedsCuda) { GTEST_SKIP() << "loom was built without CUDA"; }

#endif

}  // namespace
}  // namespace loom
