// GEMM on raw row-major buffers: the engine under mm, bmm, linear and the
// im2col convolution.
//
//   C = alpha * op(A) * op(B) + beta * C
//   op(A) is (m, k): A itself (row-major, leading dim lda) or, with trans_a,
//   the transpose of a row-major (k, m) buffer; likewise op(B) is (k, n).
//
// float32 runs loom's own packed AVX-512 kernel (8x32 register tile,
// BLIS-style cache blocking) when the CPU has AVX-512, else Eigen (AVX2/FMA
// with -march=x86-64-v3).  Other dtypes go through Eigen.  With beta == 0, C
// is overwritten and never read (it may hold garbage).
#pragma once

#include <cstdint>

namespace loom {
namespace cpu {

// Single-threaded; safe to call from inside parallel_for.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// As gemm, with C split into blocks over the intra-op threads
// (get_num_threads()); runs serially for small products.
template <typename T>
void gemm_parallel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
                   const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// Which float32 kernel gemm uses; kAuto picks AVX-512 when the CPU has it.
// For tests and benchmarks (process-wide).
enum class GemmKernel { kAuto, kEigen };
void set_gemm_kernel(GemmKernel kernel);
// Whether float32 gemm currently runs the AVX-512 kernel.
bool gemm_uses_avx512();

}  // namespace cpu
}  // namespace loom
