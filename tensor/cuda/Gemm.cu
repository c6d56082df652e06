// GEMM on CUDA: cuBLAS for float32/float64 and the 16-bit floats, a plain
// kernel for int32/int64.  float16 and bfloat16 products run on the tensor
// cores with float32 accumulation (CUBLAS_COMPUTE_32F, float alpha/beta) and
// one rounding into the 16-bit output -- except that, as in PyTorch by
// default, cuBLAS may pick split-K kernels that reduce the slices' partial
// sums in the 16-bit type; cuda::set_matmul_allow_{fp16,bf16}_reduced_
// precision_reduction(false) forbids that
// (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION).
//
// Every call goes through cublasGemmStridedBatchedEx (one matrix is a batch
// of one): transposes are cuBLAS op flags, never copies, and a batch stride
// of 0 reuses one operand for every product (broadcast bmm).  The compute type
// carries the TF32 decision explicitly -- CUBLAS_COMPUTE_32F_FAST_TF32 only
// when matmul_allow_tf32 is set, else CUBLAS_COMPUTE_32F with the handle in
// CUBLAS_DEFAULT_MATH (no tensor-core down-conversion) -- so the result does
// not depend on the NVIDIA_TF32_OVERRIDE environment or a previous caller's
// math mode.  Handles come from a per-(device, thread) pool (HandlePool.h)
// and are bound to the caller's stream before every call.
//
// cuBLAS has no int32/int64 GEMM, so integers (rare: index arithmetic in
// tests) take gemm_integer: one thread per output element, a dot product of
// length k in the element type (wrapping like the CPU's).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Gemm.h"
#include "tensor/cuda/HandlePool.h"

namespace loom {
namespace cuda {
namespace {

struct CublasTag {};

cublasHandle_t cublas_handle(int device) {
  // Never destroyed (see HandlePool.h).
  static auto* pool = new HandlePool<cublasHandle_t>([](int) {
    cublasHandle_t h = nullptr;
    LOOM_CUDA_CHECK(cublasCreate(&h));
    return h;
  });
  return thread_handle<CublasTag>(*pool, device);
}

// C (m, n, ldc) column-major, element (i, j) at c[i + j * ldc].
template <typename T>
__global__ void gemm_integer(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                             const T* __restrict__ a, int64_t lda, int64_t stride_a,
                             const T* __restrict__ b, int64_t ldb, int64_t stride_b, T* c,
                             int64_t ldc, int64_t stride_c, int64_t batch, bool accumulate) {
  const int64_t total = batch * m * n;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % m;  // consecutive threads walk a column of C
    const int64_t j = (idx / m) % n;
    const int64_t p = idx / (m * n);
    const T* ap = a + p * stride_a;
    const T* bp = b + p * stride_b;
    T acc = 0;
    for (int64_t l = 0; l < k; ++l) {
      const T av = trans_a ? ap[l + i * lda] : ap[i + l * lda];  // op(A)(i, l)
      const T bv = trans_b ? bp[j + l * ldb] : bp[l + j * ldb];  // op(B)(l, j)
      acc += av * bv;
    }
    T* cp = c + p * stride_c + i + j * ldc;
    *cp = accumulate ? *cp + acc : acc;
  }
}

cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// cuBLAS's data type for a storage type.
cudaDataType cuda_type(DType dtype) {
  switch (dtype) {
    case kFloat64: return CUDA_R_64F;
    case kFloat16: return CUDA_R_16F;
    case kBFloat16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// S: the compute type's scalar (double for float64, float for the others).
template <typename S>
void gemm_cublas(DType dtype, const GemmArgs& g, const GemmMath& math, int device,
                 cudaStream_t stream) {
  cublasHandle_t h = cublas_handle(device);
  LOOM_CUDA_CHECK(cublasSetStream(h, stream));
  const bool tf32 = dtype == kFloat32 && math.allow_tf32;
  // 16-bit inputs take the tensor cores in the default math mode.
  int mode = tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  if ((dtype == kFloat16 || dtype == kBFloat16) && !math.allow_reduced_precision_reduction)
    mode |= CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  LOOM_CUDA_CHECK(cublasSetMathMode(h, static_cast<cublasMath_t>(mode)));
  const cudaDataType type = cuda_type(dtype);
  const cublasComputeType_t compute =
      dtype == kFloat64 ? CUBLAS_COMPUTE_64F
                        : (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const S alpha = 1, beta = g.accumulate ? 1 : 0;
  LOOM_CUDA_CHECK(cublasGemmStridedBatchedEx(
      h, op(g.trans_a), op(g.trans_b), static_cast<int>(g.m), static_cast<int>(g.n),
      static_cast<int>(g.k), &alpha, g.a, type, static_cast<int>(g.lda), g.stride_a, g.b, type,
      static_cast<int>(g.ldb), g.stride_b, &beta, g.c, type, static_cast<int>(g.ldc), g.stride_c,
      static_cast<int>(g.batch), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void gemm(DType dtype, const GemmArgs& g, const GemmMath& math, int device, uint64_t stream_id) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  DeviceGuard guard(device);
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  switch (dtype) {
    case kFloat32:
    case kFloat16:
    case kBFloat16: return gemm_cublas<float>(dtype, g, math, device, stream);
    case kFloat64: return gemm_cublas<double>(dtype, g, math, device, stream);
    case kInt32:
    case kInt64: {
      const int64_t total = g.batch * g.m * g.n;
      const int threads = 256;
      const int blocks = static_cast<int>(std::min<int64_t>((total + threads - 1) / threads, 65535));
      if (dtype == kInt32)
        gemm_integer<int32_t><<<blocks, threads, 0, stream>>>(
            g.trans_a, g.trans_b, g.m, g.n, g.k, static_cast<const int32_t*>(g.a), g.lda,
            g.stride_a, static_cast<const int32_t*>(g.b), g.ldb, g.stride_b,
            static_cast<int32_t*>(g.c), g.ldc, g.stride_c, g.batch, g.accumulate);
      else
        gemm_integer<int64_t><<<blocks, threads, 0, stream>>>(
            g.trans_a, g.trans_b, g.m, g.n, g.k, static_cast<const int64_t*>(g.a), g.lda,
            g.stride_a, static_cast<const int64_t*>(g.b), g.ldb, g.stride_b,
            static_cast<int64_t*>(g.c), g.ldc, g.stride_c, g.batch, g.accumulate);
      LOOM_CUDA_CHECK(cudaGetLastError());
      return;
    }
    default:
      LOOM_FAIL("cuda::gemm: not supported for dtype ", dtype_name(dtype),
                " (supported: float32, float64, float16, bfloat16, int32, int64)");
  }
}

}  // namespace cuda
}  // namespace loom
