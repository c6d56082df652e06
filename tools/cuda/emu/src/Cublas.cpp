// cuBLAS on the host, for loom's CUDA emulator: the handle calls and GEMM
// (see include/cublas_v2.h for what is and is not emulated).
//
// A GEMM call checks its arguments as cuBLAS does and returns; the product
// itself runs later, in stream order, through loom_emu::enqueue on the
// handle's stream, with every argument captured by value (alpha and beta
// are read at call time in CUBLAS_POINTER_MODE_HOST, when the product runs in
// CUBLAS_POINTER_MODE_DEVICE).  A null device pointer is not a status: as on
// a GPU, it faults the queued work (an exception, which the stream turns
// into the device's sticky error).
//
// Each batch packs op(A) by rows and op(B) by columns into contiguous arrays
// of the compute type (rounding float32 inputs to TF32 where the compute type
// or math mode asks for it), then computes every C(i, j) as one dot product
// in the compute type, scales it by alpha, adds beta * C(i, j) unless beta is
// 0, and rounds once into C's type.  Columns of C are spread over host
// threads for large products; each element is computed by one thread in a
// fixed order, so results are deterministic.
#include <cublas_v2.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "HostMath.h"
#include "LiveHandles.h"
#include "loom_emu/Stream.h"

struct cublasContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

namespace loom_emu {
namespace cublas {
namespace {

using libs::bf16_to_float;
using libs::float_to_bf16;
using libs::float_to_half;
using libs::half_to_float;

// ---- handles -------------------------------------------------------------------------------

using Handles = libs::LiveHandles<cublasContext>;

bool is_live(const cublasContext* h) { return Handles::instance().contains(h); }

// ---- element types ---------------------------------------------------------------------------

enum class Elem { kF32, kF64, kF16, kBF16, kI8 };

bool elem_of(cudaDataType t, Elem* out) {
  switch (t) {
    case CUDA_R_32F: *out = Elem::kF32; return true;
    case CUDA_R_64F: *out = Elem::kF64; return true;
    case CUDA_R_16F: *out = Elem::kF16; return true;
    case CUDA_R_16BF: *out = Elem::kBF16; return true;
    case CUDA_R_8I: *out = Elem::kI8; return true;
    default: return false;
  }
}

template <typename Acc>
Acc load(const void* base, Elem t, int64_t i) {
  switch (t) {
    case Elem::kF32: return static_cast<Acc>(static_cast<const float*>(base)[i]);
    case Elem::kF64: return static_cast<Acc>(static_cast<const double*>(base)[i]);
    case Elem::kF16: return static_cast<Acc>(half_to_float(static_cast<const uint16_t*>(base)[i]));
    case Elem::kBF16: return static_cast<Acc>(bf16_to_float(static_cast<const uint16_t*>(base)[i]));
    case Elem::kI8: return static_cast<Acc>(static_cast<const int8_t*>(base)[i]);
  }
  return Acc(0);
}

// Rounds v once into C's type (only float and double outputs are accepted
// for the integer-free types GEMM writes).
template <typename Acc>
void store(void* base, Elem t, int64_t i, Acc v) {
  switch (t) {
    case Elem::kF32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case Elem::kF64: static_cast<double*>(base)[i] = static_cast<double>(v); return;
    case Elem::kF16:
      static_cast<uint16_t*>(base)[i] = float_to_half(static_cast<float>(v));
      return;
    case Elem::kBF16:
      static_cast<uint16_t*>(base)[i] = float_to_bf16(static_cast<float>(v));
      return;
    case Elem::kI8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); return;
  }
}

size_t elem_size(Elem t) {
  switch (t) {
    case Elem::kF64: return 8;
    case Elem::kF32: return 4;
    case Elem::kF16:
    case Elem::kBF16: return 2;
    case Elem::kI8: return 1;
  }
  return 1;
}

// ---- the product -----------------------------------------------------------------------------

// Everything one GEMM needs, by value.
struct Gemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  Elem a_type = Elem::kF32, b_type = Elem::kF32, c_type = Elem::kF32;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 1;
  bool tf32 = false;  // round float32 inputs to TF32
  const char* name = "";
};

// sum over l of a[l] * b[l], with eight partial sums (as a GPU's several
// accumulators; also kinder to long inner sizes than one running sum).
template <typename Acc>
Acc dot(const Acc* a, const Acc* b, int64_t k) {
  Acc s[8] = {};
  int64_t l = 0;
  for (; l + 8 <= k; l += 8)
    for (int u = 0; u < 8; ++u) s[u] += a[l + u] * b[l + u];
  Acc tail = 0;
  for (; l < k; ++l) tail += a[l] * b[l];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

const void* offset(const void* p, Elem t, int64_t elements) {
  return static_cast<const char*>(p) + elements * static_cast<int64_t>(elem_size(t));
}

void* offset(void* p, Elem t, int64_t elements) {
  return static_cast<char*>(p) + elements * static_cast<int64_t>(elem_size(t));
}

template <typename Acc>
void run(const Gemm& g, Acc alpha, Acc beta) {
  const bool read_ab = alpha != Acc(0) && g.k > 0;
  if (g.c == nullptr || (read_ab && (g.a == nullptr || g.b == nullptr)))
    throw std::runtime_error(std::string(g.name) + ": a null device pointer (A, B or C)");
  std::vector<Acc> at, bt;  // op(A) by rows, op(B) by columns
  if (read_ab) {
    at.resize(static_cast<size_t>(g.m * g.k));
    bt.resize(static_cast<size_t>(g.n * g.k));
  }
  for (int64_t p = 0; p < g.batch; ++p) {
    void* c = offset(g.c, g.c_type, p * g.stride_c);
    if (read_ab) {
      const void* a = offset(g.a, g.a_type, p * g.stride_a);
      const void* b = offset(g.b, g.b_type, p * g.stride_b);
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t l = 0; l < g.k; ++l) {
          Acc v = load<Acc>(a, g.a_type, g.trans_a ? l + i * g.lda : i + l * g.lda);
          if (g.tf32) v = static_cast<Acc>(libs::round_to_tf32(static_cast<float>(v)));
          at[i * g.k + l] = v;
        }
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t l = 0; l < g.k; ++l) {
          Acc v = load<Acc>(b, g.b_type, g.trans_b ? j + l * g.ldb : l + j * g.ldb);
          if (g.tf32) v = static_cast<Acc>(libs::round_to_tf32(static_cast<float>(v)));
          bt[j * g.k + l] = v;
        }
    }
    const double cost = static_cast<double>(g.m) * static_cast<double>(read_ab ? g.k : 1);
    libs::parallel_for(g.n, cost, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = 0; i < g.m; ++i) {
          Acc v = read_ab ? alpha * dot(&at[i * g.k], &bt[j * g.k], g.k) : Acc(0);
          const int64_t ci = i + j * g.ldc;
          if (beta != Acc(0)) v += beta * load<Acc>(c, g.c_type, ci);
          store<Acc>(c, g.c_type, ci, v);
        }
    });
  }
}

// ---- argument checks -------------------------------------------------------------------------

bool valid_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

bool valid_algo(cublasGemmAlgo_t algo) {
  const int a = static_cast<int>(algo);
  return a == -1 || (a >= 0 && a <= 23) || (a >= 99 && a <= 115) || a == 999;
}

int base_math(cublasMath_t mode) {
  return static_cast<int>(mode) &
         ~static_cast<int>(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
}

bool valid_math(cublasMath_t mode) {
  const int base = base_math(mode);
  return base == CUBLAS_DEFAULT_MATH || base == CUBLAS_TENSOR_OP_MATH ||
         base == CUBLAS_PEDANTIC_MATH || base == CUBLAS_TF32_TENSOR_OP_MATH ||
         base == CUBLAS_FP32_EMULATED_BF16X9_MATH || base == CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH;
}

int64_t max1(int64_t v) { return v > 1 ? v : 1; }

// The shape checks cuBLAS's gemm makes (CUBLAS_STATUS_INVALID_VALUE).
bool shapes_ok(cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, int lda,
               int ldb, int ldc) {
  if (!valid_op(transa) || !valid_op(transb)) return false;
  if (m < 0 || n < 0 || k < 0) return false;
  const int64_t a_rows = transa == CUBLAS_OP_N ? m : k;  // A as stored
  const int64_t b_rows = transb == CUBLAS_OP_N ? k : n;
  return lda >= max1(a_rows) && ldb >= max1(b_rows) && ldc >= max1(m);
}

enum class Compute { kFloat, kDouble };

// Whether cuBLAS runs (A, B, C types) under computeType, and how: the
// scalar/accumulator type and whether float32 inputs become TF32.
cublasStatus_t plan(const cublasContext* h, Elem a, Elem b, Elem c,
                    cublasComputeType_t compute_type, Compute* compute, bool* tf32) {
  *tf32 = false;
  if (a != b) return CUBLAS_STATUS_NOT_SUPPORTED;
  switch (compute_type) {
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
      if (a != Elem::kF64 || c != Elem::kF64) return CUBLAS_STATUS_NOT_SUPPORTED;
      *compute = Compute::kDouble;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC: {
      const bool ok = (a == Elem::kF32 && c == Elem::kF32) ||
                      ((a == Elem::kF16 || a == Elem::kBF16) && (c == a || c == Elem::kF32)) ||
                      (a == Elem::kI8 && c == Elem::kF32);
      if (!ok) return CUBLAS_STATUS_NOT_SUPPORTED;
      *compute = Compute::kFloat;
      // The handle's math mode may allow TF32 for the default (not pedantic) type.
      *tf32 = compute_type == CUBLAS_COMPUTE_32F && a == Elem::kF32 &&
              base_math(h->math) == CUBLAS_TF32_TENSOR_OP_MATH;
      break;
    }
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      // cuBLAS may down-convert the float32 inputs; the emulator takes TF32 for all three.
      if (a != Elem::kF32 || c != Elem::kF32) return CUBLAS_STATUS_NOT_SUPPORTED;
      *compute = Compute::kFloat;
      *tf32 = true;
      break;
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
      if (a != Elem::kF32 || c != Elem::kF32) return CUBLAS_STATUS_NOT_SUPPORTED;
      *compute = Compute::kFloat;  // the bf16x9 emulation is float32-accurate
      break;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;  // 16F and 32I compute are not emulated
  }
  if (libs::tf32_disabled_by_environment()) *tf32 = false;
  return CUBLAS_STATUS_SUCCESS;
}

// The common path of every GEMM entry point.
cublasStatus_t gemm(const char* name, cublasHandle_t handle, cublasOperation_t transa,
                    cublasOperation_t transb, int m, int n, int k, const void* alpha,
                    const void* A, cudaDataType Atype, int lda, long long strideA, const void* B,
                    cudaDataType Btype, int ldb, long long strideB, const void* beta, void* C,
                    cudaDataType Ctype, int ldc, long long strideC, int batchCount,
                    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!shapes_ok(transa, transb, m, n, k, lda, ldb, ldc) || batchCount < 0 ||
      alpha == nullptr || beta == nullptr || !valid_algo(algo))
    return CUBLAS_STATUS_INVALID_VALUE;
  Gemm g;
  if (!elem_of(Atype, &g.a_type) || !elem_of(Btype, &g.b_type) || !elem_of(Ctype, &g.c_type))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  Compute compute = Compute::kFloat;
  const cublasStatus_t planned =
      plan(handle, g.a_type, g.b_type, g.c_type, computeType, &compute, &g.tf32);
  if (planned != CUBLAS_STATUS_SUCCESS) return planned;
  if (m == 0 || n == 0 || batchCount == 0) return CUBLAS_STATUS_SUCCESS;  // nothing to do
  g.trans_a = transa != CUBLAS_OP_N;
  g.trans_b = transb != CUBLAS_OP_N;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = A;
  g.b = B;
  g.c = C;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.stride_a = strideA;
  g.stride_b = strideB;
  g.stride_c = strideC;
  g.batch = batchCount;
  g.name = name;
  const bool on_device = handle->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
  if (compute == Compute::kDouble) {
    const auto* pa = static_cast<const double*>(alpha);
    const auto* pb = static_cast<const double*>(beta);
    if (on_device) {
      enqueue(handle->stream, [g, pa, pb] { run<double>(g, *pa, *pb); });
    } else {
      const double a = *pa, b = *pb;
      enqueue(handle->stream, [g, a, b] { run<double>(g, a, b); });
    }
  } else {
    const auto* pa = static_cast<const float*>(alpha);
    const auto* pb = static_cast<const float*>(beta);
    if (on_device) {
      enqueue(handle->stream, [g, pa, pb] { run<float>(g, *pa, *pb); });
    } else {
      const float a = *pa, b = *pb;
      enqueue(handle->stream, [g, a, b] { run<float>(g, a, b); });
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace
}  // namespace cublas
}  // namespace loom_emu

using loom_emu::cublas::is_live;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* h = new cublasContext();
  h->device = device;
  loom_emu::cublas::Handles::instance().add(h);
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (handle == nullptr || !loom_emu::cublas::Handles::instance().remove(handle))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;  // queued work holds copies of what it needs, never the handle
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (version == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
  if (value == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

size_t cublasGetCudartVersion() { return CUDART_VERSION; }

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                     size_t workspaceSizeInBytes) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspace == nullptr && workspaceSizeInBytes > 0) return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;  // kept, never used: the emulator needs none
  handle->workspace_bytes = workspaceSizeInBytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = streamId;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (streamId == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *streamId = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!loom_emu::cublas::valid_math(mode)) return CUBLAS_STATUS_INVALID_VALUE;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
  }
  return "unknown error";
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  // Sgemm's compute type follows the math mode (pedantic, or TF32 allowed).
  const cublasComputeType_t compute = loom_emu::cublas::base_math(handle->math) ==
                                              CUBLAS_PEDANTIC_MATH
                                          ? CUBLAS_COMPUTE_32F_PEDANTIC
                                          : CUBLAS_COMPUTE_32F;
  return loom_emu::cublas::gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A,
                                CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, beta, C, CUDA_R_32F,
                                ldc, 0, 1, compute, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const double* alpha,
                              const double* A, int lda, const double* B, int ldb,
                              const double* beta, double* C, int ldc) {
  return loom_emu::cublas::gemm("cublasDgemm", handle, transa, transb, m, n, k, alpha, A,
                                CUDA_R_64F, lda, 0, B, CUDA_R_64F, ldb, 0, beta, C, CUDA_R_64F,
                                ldc, 0, 1, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  return loom_emu::cublas::gemm("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, Atype,
                                lda, 0, B, Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1, computeType,
                                algo);
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType Atype, int lda, long long int strideA,
    const void* B, cudaDataType Btype, int ldb, long long int strideB, const void* beta, void* C,
    cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return loom_emu::cublas::gemm("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k,
                                alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C,
                                Ctype, ldc, strideC, batchCount, computeType, algo);
}

}  // extern "C"
