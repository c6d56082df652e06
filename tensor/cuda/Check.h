// LOOM_CUDA_CHECK(call): the one check for every CUDA-family call.
//
// Wrap any call that returns a CUDA runtime (cudaError_t), cuBLAS
// (cublasStatus_t), cuDNN (cudnnStatus_t) or NCCL (ncclResult_t) status:
//
//   LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream));
//   LOOM_CUDA_CHECK(cublasSgemm(handle, ...));
//
// A failing call throws loom::Error naming the library, file and line, the
// call's text, and the library's own error name/string, e.g.
//   "CUDA error at tensor/cuda/Copy.cu:42 in cudaMemcpyAsync(...):
//    cudaErrorInvalidValue (invalid argument)".
// The status type picks the overload below, so one macro covers all four
// libraries.  A failed CUDA runtime call also clears the runtime's (non-sticky)
// last error, so a later cudaGetLastError() does not report it twice.
//
// Usable from .cu files (nvcc) and from .cpp files compiled against the CUDA
// headers, i.e. only where LOOM_WITH_CUDA is defined; code that must build
// without CUDA includes tensor/CudaRuntime.h instead.
#pragma once

#ifndef LOOM_WITH_CUDA
#error "tensor/cuda/Check.h needs the CUDA toolkit (LOOM_WITH_CUDA is not defined)"
#endif

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "tensor/Error.h"

namespace loom {
namespace cuda {
namespace detail {

inline bool is_success(cudaError_t s) { return s == cudaSuccess; }
inline bool is_success(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }
inline bool is_success(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; }
inline bool is_success(ncclResult_t s) { return s == ncclSuccess; }

inline const char* library_name(cudaError_t) { return "CUDA"; }
inline const char* library_name(cublasStatus_t) { return "cuBLAS"; }
inline const char* library_name(cudnnStatus_t) { return "cuDNN"; }
inline const char* library_name(ncclResult_t) { return "NCCL"; }

inline std::string error_text(cudaError_t s) {
  cudaGetLastError();  // clear the non-sticky error this call left behind
  return std::string(cudaGetErrorName(s)) + " (" + cudaGetErrorString(s) + ")";
}
inline std::string error_text(cublasStatus_t s) {
  return std::string(cublasGetStatusName(s)) + " (" + cublasGetStatusString(s) + ")";
}
inline std::string error_text(cudnnStatus_t s) { return cudnnGetErrorString(s); }
inline std::string error_text(ncclResult_t s) { return ncclGetErrorString(s); }

// Throws the loom::Error for a failed call; kept out of line of the macro so
// each check site stays one compare and one branch.
template <typename Status>
[[noreturn]] void fail_call(Status status, const char* call, const char* file, int line) {
  LOOM_FAIL(library_name(status), " error at ", file, ":", line, " in ", call, ": ",
            error_text(status));
}

}  // namespace detail
}  // namespace cuda
}  // namespace loom

#define LOOM_CUDA_CHECK(call)                                                     \
  do {                                                                            \
    const auto loom_cuda_status_ = (call);                                        \
    if (!::loom::cuda::detail::is_success(loom_cuda_status_))                     \
      ::loom::cuda::detail::fail_call(loom_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)
