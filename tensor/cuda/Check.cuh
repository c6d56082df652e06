// LOOM_CUDA_CHECK: the one check for CUDA runtime calls in .cu files.  A
// failing call throws loom::Error naming the call, file, line and CUDA's own
// error string.  Include only from code compiled by nvcc.
#pragma once

#include <cuda_runtime.h>

#include "tensor/Error.h"

#define LOOM_CUDA_CHECK(call)                                                         \
  do {                                                                                \
    const cudaError_t loom_cuda_status_ = (call);                                     \
    if (loom_cuda_status_ != cudaSuccess)                                             \
      LOOM_FAIL("CUDA error at ", __FILE__, ":", __LINE__, " in ", #call, ": ",      \
                cudaGetErrorName(loom_cuda_status_), " (",                            \
                cudaGetErrorString(loom_cuda_status_), ")");                          \
  } while (0)
