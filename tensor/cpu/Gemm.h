// GEMM on raw row-major buffers: the engine under mm, bmm, linear and the
// im2col convolution.
//
//   C = alpha * op(A) * op(B) + beta * C
//   op(A) is (m, k): A itself (row-major, leading dim lda) or, with trans_a,
//   the transpose of a row-major (k, m) buffer; likewise op(B) is (k, n).
//
// float32 runs loom's own packed AVX-512 kernel (8x32 register tile,
// BLIS-style cache blocking) when the CPU has AVX-512 -- products of at most
// 8 rows (a linear layer on a few samples) unpacked, reading B once where it
// is -- else Eigen (AVX2/FMA with -march=x86-64-v3).  Other dtypes go
// through Eigen.  With beta == 0, C is overwritten and never read (it may
// hold garbage).
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

// ---- shifted-row products: convolution without im2col (float32, AVX-512) ----
//
// In a stride-1 convolution over a zero-padded plane of width Wp, output
// pixel p' = oh * Wp + ow reads input pixel p' + ki * Wp + kj, so row
// (c, ki, kj) of the im2col matrix is the padded input itself, shifted.
// These products take such operands as a base pointer plus one offset per row.

// Whether the kernels below can run (the CPU has AVX-512).
bool shifted_kernels_available();
// Packs op(A) (m x k) into panels of 8 rows (zero-padded) for gemm_shifted_b:
// dst holds ceil(m / 8) * 8 * k floats.
void pack_rows8(bool trans_a, int64_t m, int64_t k, const float* a, int64_t lda, float* dst);
// c (m x n) = A (m x k) @ B (+ c when accumulate), A packed by pack_rows8, row
// r of B at b + b_off[r]; every row must have n + 32 readable floats.
void gemm_shifted_b(int64_t m, int64_t n, int64_t k, const float* a_packed, const float* b,
                    const int64_t* b_off, float* c, int64_t ldc, bool accumulate);
// c (m x n) += sum over segments s of A_s (m x len) @ B_s (len x n), where
// row r of A_s is a[s] + a_off[r] (contiguous) and row p of B_s is
// b[s] + p * ldb.
void gemm_shifted_a(int64_t m, int64_t n, int64_t len, int64_t segments, const float* const* a,
                    const int64_t* a_off, const float* const* b, int64_t ldb, float* c,
                    int64_t ldc);

}  // namespace cpu
}  // namespace loom
