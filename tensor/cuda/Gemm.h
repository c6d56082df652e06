// CUDA GEMM launcher on raw pointers, for tensor/cuda/Gemm.cpp.
//
// Arguments are cuBLAS's (column-major); tensor/native/GemmLayout.h maps
// loom's row-major products onto them.  Plain C++ declarations; the
// implementation is in Gemm.cu.
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cuda {

// batch column-major products C_i (m, n) = op(A_i) (m, k) @ op(B_i) (k, n)
// (+ C_i when accumulate), A_i = a + i * stride_a (a stride may be 0: the
// same matrix for every i), likewise B_i and C_i.  The floating types run on
// cuBLAS as GemmMath says; int32 and int64 on a plain CUDA kernel (cuBLAS has no integer GEMM of these types).  Sizes
// and leading dims must fit in int (the caller checks).  Queued on `stream`
// of `device` with this thread's cuBLAS handle for the device; returns without
// waiting.  Throws loom::Error on a CUDA/cuBLAS error.
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 1, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 1, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 1, stride_c = 0;
  int64_t batch = 1;
  bool accumulate = false;
};
// The cuBLAS math a product may use (tensor/CudaFlags.h's switches).
struct GemmMath {
  bool allow_tf32 = false;  // float32 on TF32 tensor cores
  // float16/bfloat16: partial sums may be reduced in the 16-bit type.
  bool allow_reduced_precision_reduction = true;
};
void gemm(DType dtype, const GemmArgs& args, const GemmMath& math, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
