// cuBLAS (the v2 API) as loom's CUDA emulator provides it (tools/cuda/emu).
//
// Emulated, with cuBLAS's names, numeric enum values, signatures and
// argument checks, implemented on the host by tools/cuda/emu/src/Cublas.cpp:
//   - handles: create/destroy, stream, math mode, pointer mode, workspace
//     (accepted, unused), versions and the status name/string calls;
//   - GEMM: cublasSgemm, cublasDgemm, cublasGemmEx and
//     cublasGemmStridedBatchedEx -- column-major, op N/T/C, any lda/ldb/ldc
//     and batch strides (0 included), float32/float64/float16/bfloat16 data
//     (and int8 inputs into float32), compute types 32F (plus _PEDANTIC and
//     _FAST_*) and 64F.  Products accumulate in float (double for 64F) and
//     are rounded once into the output type (round to nearest even); beta 0
//     means C is not read; alpha 0 means A and B are not read.  TF32 is
//     emulated: float32 inputs are rounded to TF32 under a _FAST_ compute
//     type, or under CUBLAS_TF32_TENSOR_OP_MATH with CUBLAS_COMPUTE_32F
//     (unless NVIDIA_TF32_OVERRIDE=0), as on an Ampere or later GPU.
//   - stream order: the product runs through loom_emu::enqueue on the
//     handle's stream; the call returns at once.
// Not emulated: every other BLAS routine, the _64 entry points, complex
// types, compute types 16F and 32I (CUBLAS_STATUS_NOT_SUPPORTED), split-K
// reductions in 16-bit precision (the emulator always reduces in the compute
// type, so CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION changes nothing),
// algorithm selection (every cublasGemmAlgo_t runs the same loop), logging.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "library_types.h"

#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR 0
#define CUBLAS_VER_PATCH 0
#define CUBLAS_VER_BUILD 0
#define CUBLAS_VERSION (CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH)

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
};

enum cublasOperation_t {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
  CUBLAS_OP_HERMITAN = 2,
  CUBLAS_OP_CONJG = 3,  // a placeholder in cuBLAS too: rejected
};

enum cublasPointerMode_t {
  CUBLAS_POINTER_MODE_HOST = 0,
  CUBLAS_POINTER_MODE_DEVICE = 1,
};

enum cublasGemmAlgo_t {
  CUBLAS_GEMM_DFALT = -1,
  CUBLAS_GEMM_DEFAULT = -1,
  CUBLAS_GEMM_ALGO0 = 0,
  CUBLAS_GEMM_ALGO1 = 1,
  CUBLAS_GEMM_ALGO2 = 2,
  CUBLAS_GEMM_ALGO3 = 3,
  CUBLAS_GEMM_ALGO4 = 4,
  CUBLAS_GEMM_ALGO5 = 5,
  CUBLAS_GEMM_ALGO6 = 6,
  CUBLAS_GEMM_ALGO7 = 7,
  CUBLAS_GEMM_ALGO8 = 8,
  CUBLAS_GEMM_ALGO9 = 9,
  CUBLAS_GEMM_ALGO10 = 10,
  CUBLAS_GEMM_ALGO11 = 11,
  CUBLAS_GEMM_ALGO12 = 12,
  CUBLAS_GEMM_ALGO13 = 13,
  CUBLAS_GEMM_ALGO14 = 14,
  CUBLAS_GEMM_ALGO15 = 15,
  CUBLAS_GEMM_ALGO16 = 16,
  CUBLAS_GEMM_ALGO17 = 17,
  CUBLAS_GEMM_ALGO18 = 18,
  CUBLAS_GEMM_ALGO19 = 19,
  CUBLAS_GEMM_ALGO20 = 20,
  CUBLAS_GEMM_ALGO21 = 21,
  CUBLAS_GEMM_ALGO22 = 22,
  CUBLAS_GEMM_ALGO23 = 23,
  CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99,
  CUBLAS_GEMM_DFALT_TENSOR_OP = 99,
  CUBLAS_GEMM_ALGO0_TENSOR_OP = 100,
  CUBLAS_GEMM_ALGO1_TENSOR_OP = 101,
  CUBLAS_GEMM_ALGO2_TENSOR_OP = 102,
  CUBLAS_GEMM_ALGO3_TENSOR_OP = 103,
  CUBLAS_GEMM_ALGO4_TENSOR_OP = 104,
  CUBLAS_GEMM_ALGO5_TENSOR_OP = 105,
  CUBLAS_GEMM_ALGO6_TENSOR_OP = 106,
  CUBLAS_GEMM_ALGO7_TENSOR_OP = 107,
  CUBLAS_GEMM_ALGO8_TENSOR_OP = 108,
  CUBLAS_GEMM_ALGO9_TENSOR_OP = 109,
  CUBLAS_GEMM_ALGO10_TENSOR_OP = 110,
  CUBLAS_GEMM_ALGO11_TENSOR_OP = 111,
  CUBLAS_GEMM_ALGO12_TENSOR_OP = 112,
  CUBLAS_GEMM_ALGO13_TENSOR_OP = 113,
  CUBLAS_GEMM_ALGO14_TENSOR_OP = 114,
  CUBLAS_GEMM_ALGO15_TENSOR_OP = 115,
  CUBLAS_GEMM_AUTOTUNE = 999,
};

// A base mode, optionally or-ed with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION.
enum cublasMath_t {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
  CUBLAS_FP32_EMULATED_BF16X9_MATH = 4,
  CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH = 8,
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,
};

typedef cudaDataType cublasDataType_t;

enum cublasComputeType_t {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_16F_PEDANTIC = 65,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_32F_EMULATED_16BFX9 = 78,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_64F_PEDANTIC = 71,
  CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT = 79,
  CUBLAS_COMPUTE_32I = 72,
  CUBLAS_COMPUTE_32I_PEDANTIC = 73,
};

struct cublasContext;
typedef cublasContext* cublasHandle_t;

extern "C" {

// ---- the library and its handles ----------------------------------------------------------

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle);
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version);
cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value);
size_t cublasGetCudartVersion();
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                     size_t workspaceSizeInBytes);
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId);
cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode);
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

// ---- GEMM: C = alpha * op(A) op(B) + beta * C, column-major ----------------------------------

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc);
cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const double* alpha,
                              const double* A, int lda, const double* B, int ldb,
                              const double* beta, double* C, int ldc);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType Atype, int lda, long long int strideA,
    const void* B, cudaDataType Btype, int ldb, long long int strideB, const void* beta, void* C,
    cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo);

}  // extern "C"

// The v2 names, as cublas_v2.h maps them.
#define cublasCreate cublasCreate_v2
#define cublasDestroy cublasDestroy_v2
#define cublasGetVersion cublasGetVersion_v2
#define cublasSetWorkspace cublasSetWorkspace_v2
#define cublasSetStream cublasSetStream_v2
#define cublasGetStream cublasGetStream_v2
#define cublasGetPointerMode cublasGetPointerMode_v2
#define cublasSetPointerMode cublasSetPointerMode_v2
#define cublasSgemm cublasSgemm_v2
#define cublasDgemm cublasDgemm_v2
