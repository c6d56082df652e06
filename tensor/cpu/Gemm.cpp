// GEMM kernels.  Why a hand-written float32 kernel: the machines loom is
// measured on have AVX-512, the build targets x86-64-v3 (so Eigen stops at
// AVX2), and convolution is GEMM-bound; a packed AVX-512 kernel doubles the
// throughput.  It follows the BLIS scheme:
//
//   for jc in N step NC            B block (KC x NC) packed into NR-wide panels
//     for pc in K step KC
//       for ic in M step MC        A block (MC x KC) packed into MR-tall panels
//         for jr in NC step NR     one B panel stays in L1
//           for ir in MC step MR   8x32 register tile: 16 zmm accumulators
//
// Packing absorbs transposes (8x8 in-register transposes for the strided
// side), so every orientation runs at the same speed.  The AVX-512 code is
// compiled with a target pragma and only entered when the CPU reports
// AVX-512.  float32 without AVX-512 goes to oneDNN's sgemm (JIT-compiled for
// the CPU it runs on; 1.5-2x Eigen's AVX2 code on the small-K products of
// ResNet's 1x1 convolutions); other dtypes use Eigen.
#define EIGEN_DONT_PARALLELIZE  // loom splits work itself (gemm_parallel)
#include "tensor/cpu/Gemm.h"

// GCC 12's AVX-512 intrinsics build values from deliberately undefined
// registers, which -Wmaybe-uninitialized reports wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <Eigen/Core>
#include <dnnl.h>
#include <omp.h>

#include "tensor/Error.h"
#include "tensor/Parallel.h"
#include "tensor/cpu/OmpThreads.h"

namespace loom {
namespace cpu {
namespace {

// ---- Eigen: every dtype, and float32 without AVX-512 ------------------------

template <typename T>
void eigen_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<Mat, 0, Stride> C(c, m, n, Stride(ldc));
  if (beta == T(0)) {
    C.setZero();
  } else if (beta != T(1)) {
    C *= beta;
  }
  if (k == 0) return;
  Eigen::Map<const Mat, 0, Stride> A(a, trans_a ? k : m, trans_a ? m : k, Stride(lda));
  Eigen::Map<const Mat, 0, Stride> B(b, trans_b ? n : k, trans_b ? k : n, Stride(ldb));
  auto run = [&](const auto& op_a, const auto& op_b) {
    if (alpha == T(1)) {
      C.noalias() += op_a * op_b;
    } else {
      C.noalias() += alpha * (op_a * op_b);
    }
  };
  if (!trans_a && !trans_b) run(A, B);
  if (trans_a && !trans_b) run(A.transpose(), B);
  if (!trans_a && trans_b) run(A, B.transpose());
  if (trans_a && trans_b) run(A.transpose(), B.transpose());
}

std::atomic<int> g_kernel{static_cast<int>(GemmKernel::kAuto)};

bool cpu_has_avx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
           std::getenv("LOOM_DISABLE_AVX512") == nullptr;
  }();
  return has;
}

// ---- packed AVX-512 float32 kernel ------------------------------------------

constexpr int64_t kMR = 8;     // rows of the register tile
constexpr int64_t kNR = 32;    // columns of the register tile (2 zmm)
constexpr int64_t kKC = 256;   // depth of a packed block
constexpr int64_t kMC = 256;   // rows of a packed A block (L2)
constexpr int64_t kNC = 1024;  // columns of a packed B block
// Products of at most kMR rows with a B of at least this many elements skip
// the packing (sgemm_small_m_avx512).
constexpr int64_t kSmallMMinWork = 4096;

// Per-thread packing buffers, allocated once.
struct PackBuffers {
  float* a = nullptr;  // (kMC x kKC), as kMC / kMR panels of (kKC x kMR)
  float* b = nullptr;  // (kKC x kNC), as kNC / kNR panels of (kKC x kNR)
  PackBuffers() {
    a = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * kMC * kKC));
    b = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * kKC * kNC));
    LOOM_CHECK(a != nullptr && b != nullptr, "gemm: out of memory for packing buffers");
  }
  ~PackBuffers() {
    std::free(a);
    std::free(b);
  }
  PackBuffers(const PackBuffers&) = delete;
  PackBuffers& operator=(const PackBuffers&) = delete;
};

PackBuffers& pack_buffers() {
  thread_local PackBuffers buffers;
  return buffers;
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")

// dst[c * ld_dst + r] = src[r * ld_src + c] for an 8x8 block.
inline void transpose8x8(const float* src, int64_t ld_src, float* dst, int64_t ld_dst) {
  __m256 r0 = _mm256_loadu_ps(src + 0 * ld_src), r1 = _mm256_loadu_ps(src + 1 * ld_src);
  __m256 r2 = _mm256_loadu_ps(src + 2 * ld_src), r3 = _mm256_loadu_ps(src + 3 * ld_src);
  __m256 r4 = _mm256_loadu_ps(src + 4 * ld_src), r5 = _mm256_loadu_ps(src + 5 * ld_src);
  __m256 r6 = _mm256_loadu_ps(src + 6 * ld_src), r7 = _mm256_loadu_ps(src + 7 * ld_src);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(dst + 0 * ld_dst, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_storeu_ps(dst + 1 * ld_dst, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_storeu_ps(dst + 2 * ld_dst, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_storeu_ps(dst + 3 * ld_dst, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_storeu_ps(dst + 4 * ld_dst, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_storeu_ps(dst + 5 * ld_dst, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_storeu_ps(dst + 6 * ld_dst, _mm256_permute2f128_ps(s2, s6, 0x31));
  _mm256_storeu_ps(dst + 7 * ld_dst, _mm256_permute2f128_ps(s3, s7, 0x31));
}

// Packs op(A)[0:mc, 0:kc] into panels of kMR rows: panel p holds
// dst[p * kc * kMR + k * kMR + r] = op(A)(p * kMR + r, k); missing rows are 0.
// `a` points at op(A)(0, 0).
void pack_a(bool trans_a, const float* a, int64_t lda, int64_t mc, int64_t kc, float* dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += kMR, dst += kc * kMR) {
    const int64_t rows = std::min(kMR, mc - i0);
    if (trans_a) {
      // op(A)(i, k) = a[k * lda + i]: each k holds the panel's rows contiguously.
      const float* src = a + i0;
      if (rows == kMR) {
        for (int64_t k = 0; k < kc; ++k)
          _mm256_storeu_ps(dst + k * kMR, _mm256_loadu_ps(src + k * lda));
      } else {
        const __mmask8 mask = static_cast<__mmask8>((1u << rows) - 1);
        for (int64_t k = 0; k < kc; ++k)
          _mm256_storeu_ps(dst + k * kMR, _mm256_maskz_loadu_ps(mask, src + k * lda));
      }
    } else {
      // op(A)(i, k) = a[i * lda + k]: transpose 8x8 blocks.
      const float* src = a + i0 * lda;
      int64_t k = 0;
      if (rows == kMR)
        for (; k + 8 <= kc; k += 8) transpose8x8(src + k, lda, dst + k * kMR, kMR);
      for (; k < kc; ++k)
        for (int64_t r = 0; r < kMR; ++r) dst[k * kMR + r] = r < rows ? src[r * lda + k] : 0.f;
    }
  }
}

// Packs op(B)[0:kc, 0:nc] into panels of kNR columns: panel p holds
// dst[p * kc * kNR + k * kNR + j] = op(B)(k, p * kNR + j); missing columns are 0.
void pack_b(bool trans_b, const float* b, int64_t ldb, int64_t kc, int64_t nc, float* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += kNR, dst += kc * kNR) {
    const int64_t cols = std::min(kNR, nc - j0);
    if (!trans_b) {
      const float* src = b + j0;
      if (cols == kNR) {
        for (int64_t k = 0; k < kc; ++k) {
          _mm512_store_ps(dst + k * kNR, _mm512_loadu_ps(src + k * ldb));
          _mm512_store_ps(dst + k * kNR + 16, _mm512_loadu_ps(src + k * ldb + 16));
        }
      } else {
        const uint32_t bits = cols == 32 ? 0xFFFFFFFFu : ((1u << cols) - 1);
        const __mmask16 lo = static_cast<__mmask16>(bits & 0xFFFF);
        const __mmask16 hi = static_cast<__mmask16>(bits >> 16);
        for (int64_t k = 0; k < kc; ++k) {
          _mm512_store_ps(dst + k * kNR, _mm512_maskz_loadu_ps(lo, src + k * ldb));
          _mm512_store_ps(dst + k * kNR + 16, _mm512_maskz_loadu_ps(hi, src + k * ldb + 16));
        }
      }
    } else {
      // op(B)(k, j) = b[j * ldb + k]: transpose 8x8 blocks.
      const float* src = b + j0 * ldb;
      const int64_t full = cols / 8 * 8;
      int64_t k = 0;
      for (; k + 8 <= kc; k += 8) {
        for (int64_t jj = 0; jj < full; jj += 8)
          transpose8x8(src + jj * ldb + k, ldb, dst + k * kNR + jj, kNR);
        for (int64_t kk = k; kk < k + 8; ++kk)
          for (int64_t j = full; j < kNR; ++j)
            dst[kk * kNR + j] = j < cols ? src[j * ldb + kk] : 0.f;
      }
      for (; k < kc; ++k)
        for (int64_t j = 0; j < kNR; ++j) dst[k * kNR + j] = j < cols ? src[j * ldb + k] : 0.f;
    }
  }
}

// Writes an 8x32 accumulator tile: c = alpha * acc (+ c when accumulate),
// for the top-left rows x cols of the tile.
__attribute__((always_inline)) inline void store_tile_8x32(__m512 (&acc)[kMR][2], float* c, int64_t ldc, float alpha,
                            bool accumulate, int64_t rows, int64_t cols) {
  if (alpha != 1.f) {
    const __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      acc[r][0] = _mm512_mul_ps(acc[r][0], al);
      acc[r][1] = _mm512_mul_ps(acc[r][1], al);
    }
  }
  if (rows == kMR && cols == kNR) {
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      float* row = c + r * ldc;
      if (accumulate) {
        acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_loadu_ps(row));
        acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_loadu_ps(row + 16));
      }
      _mm512_storeu_ps(row, acc[r][0]);
      _mm512_storeu_ps(row + 16, acc[r][1]);
    }
    return;
  }
  // Edge tile: masked loads and stores of the valid columns.
  const uint32_t bits = cols >= 32 ? 0xFFFFFFFFu : ((1u << cols) - 1);
  const __mmask16 lo = static_cast<__mmask16>(bits & 0xFFFF);
  const __mmask16 hi = static_cast<__mmask16>(bits >> 16);
  for (int r = 0; r < kMR; ++r) {
    if (r >= rows) break;
    float* row = c + r * ldc;
    __m512 v0 = acc[r][0], v1 = acc[r][1];
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(lo, row));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(hi, row + 16));
    }
    _mm512_mask_storeu_ps(row, lo, v0);
    _mm512_mask_storeu_ps(row + 16, hi, v1);
  }
}

// The 8x32 register tile: c = alpha * A panel (kc x 8)^T * B panel (kc x 32)
// (+ c when accumulate), for the top-left rows x cols of the tile.
void kernel_8x32(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* c,
                 int64_t ldc, float alpha, bool accumulate, int64_t rows, int64_t cols) {
  __m512 acc[kMR][2];
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(bp);
    const __m512 b1 = _mm512_load_ps(bp + 16);
    _mm_prefetch(reinterpret_cast<const char*>(bp + 8 * kNR), _MM_HINT_T0);
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      const __m512 av = _mm512_set1_ps(ap[r]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
    ap += kMR;
    bp += kNR;
  }
  store_tile_8x32(acc, c, ldc, alpha, accumulate, rows, cols);
}

// ---- products of at most kMR rows, unpacked ----------------------------------
//
// A linear layer on a few samples (a pipeline's micro-batch of 4 through
// ResNet's 2048 -> 1000 classifier, say) is a product of m <= 8 rows with a
// large B.  The packed kernel copies (and, for a transposed B, transposes)
// all of B to use each element for at most 8 rows: for m = 4 that copy is
// most of its time.  These kernels read B once, where it is, and keep op(A)
// (m x k, at most 8 rows) in L1.

// Writes alpha * sum (+ beta * *c).
inline void store_scaled(float* c, float sum, float alpha, float beta) {
  *c = beta == 0.f ? alpha * sum : alpha * sum + beta * *c;
}

// The sum of v's 16 lanes (_mm512_reduce_add_ps trips GCC 12's
// -Wuninitialized through its undefined-register intrinsics).
inline float lane_sum(__m512 v) {
  alignas(64) float lane[16];
  _mm512_store_ps(lane, v);
  float sum = 0.f;
  for (float f : lane) sum += f;
  return sum;
}

// The mask of the first `count` (< 16) lanes, or of all 16.
inline __mmask16 lanes(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : static_cast<__mmask16>((1u << count) - 1u);
}

// op(B) transposed in memory (B is n x k, row j = column j of op(B)):
// C[i][j] = dot(A row i, B row j).  J rows of B at a time, M rows of A,
// M * J accumulators, each a 16-lane partial sum over k.
template <int M, int J>
void small_m_dots(const float* const* a_rows, const float* b, int64_t ldb, int64_t k, int64_t j,
                  float alpha, float beta, float* c, int64_t ldc) {
  __m512 acc[M][J];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int jj = 0; jj < J; ++jj) acc[i][jj] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; p += 16) {
    const __mmask16 mask = lanes(k - p);
    __m512 bv[J];
#pragma GCC unroll 4
    for (int jj = 0; jj < J; ++jj) bv[jj] = _mm512_maskz_loadu_ps(mask, b + (j + jj) * ldb + p);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m512 av = _mm512_maskz_loadu_ps(mask, a_rows[i] + p);
#pragma GCC unroll 4
      for (int jj = 0; jj < J; ++jj) acc[i][jj] = _mm512_fmadd_ps(av, bv[jj], acc[i][jj]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int jj = 0; jj < J; ++jj)
      store_scaled(c + i * ldc + j + jj, lane_sum(acc[i][jj]), alpha, beta);
}

// op(B) is B (k x n, row-major): C[i][cols] = sum_p A[i][p] * B[p][cols].
// V * 16 columns at a time, M rows: M * V accumulators over all of k.
template <int M, int V>
void small_m_rows(const float* const* a_rows, const float* b, int64_t ldb, int64_t k, int64_t j,
                  int64_t n, float alpha, float beta, float* c, int64_t ldc) {
  __mmask16 mask[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) mask[v] = j + 16 * v < n ? lanes(n - j - 16 * v) : 0;
  __m512 acc[M][V];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], b + p * ldb + j + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m512 av = _mm512_set1_ps(a_rows[i][p]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* dst = c + i * ldc + j + 16 * v;
      __m512 out = _mm512_mul_ps(va, acc[i][v]);
      if (beta != 0.f) out = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], dst), out);
      _mm512_mask_storeu_ps(dst, mask[v], out);
    }
}

template <int M>
void sgemm_small_m_rows(bool trans_b, int64_t n, int64_t k, float alpha, const float* const* a_rows,
                        const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // 16 accumulators: M * J (or M * V) <= 16.
  constexpr int kWide = M <= 4 ? 4 : 2;
  if (trans_b) {
    int64_t j = 0;
    for (; j + kWide <= n; j += kWide)
      small_m_dots<M, kWide>(a_rows, b, ldb, k, j, alpha, beta, c, ldc);
    for (; j < n; ++j) small_m_dots<M, 1>(a_rows, b, ldb, k, j, alpha, beta, c, ldc);
  } else {
    for (int64_t j = 0; j < n; j += 16 * kWide)
      small_m_rows<M, kWide>(a_rows, b, ldb, k, j, n, alpha, beta, c, ldc);
  }
}

// m in [1, kMR], k >= 1.
void sgemm_small_m_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                          float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                          float beta, float* c, int64_t ldc) {
  // op(A)'s rows: A's own rows, or a transposed A copied row by row.
  thread_local std::vector<float> a_copy;
  const float* a_rows[kMR];
  if (trans_a) {
    a_copy.resize(static_cast<size_t>(m * k));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t i = 0; i < m; ++i) a_copy[i * k + p] = a[p * lda + i];
    for (int64_t i = 0; i < m; ++i) a_rows[i] = a_copy.data() + i * k;
  } else {
    for (int64_t i = 0; i < m; ++i) a_rows[i] = a + i * lda;
  }
  switch (m) {
    case 1: return sgemm_small_m_rows<1>(trans_b, n, k, alpha, a_rows, b, ldb, beta, c, ldc);
    case 2: return sgemm_small_m_rows<2>(trans_b, n, k, alpha, a_rows, b, ldb, beta, c, ldc);
    case 3: return sgemm_small_m_rows<3>(trans_b, n, k, alpha, a_rows, b, ldb, beta, c, ldc);
    case 4: return sgemm_small_m_rows<4>(trans_b, n, k, alpha, a_rows, b, ldb, beta, c, ldc);
    case 5: return sgemm_small_m_rows<5>(trans_b, n, k, alpha, a_rows, b, ldb, beta, c, ldc);
    case 6: return sgemm_small_m_rows<6>(trans_b, n, k, alpha, a_rows, b, ldb, beta, c, ldc);
    case 7: return sgemm_small_m_rows<7>(trans_b, n, k, alpha, a_rows, b, ldb, beta, c, ldc);
    default: return sgemm_small_m_rows<8>(trans_b, n, k, alpha, a_rows, b, ldb, beta, c, ldc);
  }
}

void sgemm_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc) {
  if (beta != 0.f && beta != 1.f)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] *= beta;
  if (k == 0) {
    if (beta == 0.f)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.f);
    return;
  }
  // C is scaled by beta already (above): from here on beta is 0 or 1.
  if (m <= kMR && n * k >= kSmallMMinWork)
    return sgemm_small_m_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                                beta == 0.f ? 0.f : 1.f, c, ldc);
  PackBuffers& buf = pack_buffers();
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      const bool accumulate = pc > 0 || beta != 0.f;
      pack_b(trans_b, trans_b ? b + jc * ldb + pc : b + pc * ldb + jc, ldb, kc, nc, buf.b);
      for (int64_t ic = 0; ic < m; ic += kMC) {
        const int64_t mc = std::min(kMC, m - ic);
        pack_a(trans_a, trans_a ? a + pc * lda + ic : a + ic * lda + pc, lda, mc, kc, buf.a);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const float* bp = buf.b + jr * kc;
          const int64_t cols = std::min(kNR, nc - jr);
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            kernel_8x32(kc, buf.a + ir * kc, bp, c + (ic + ir) * ldc + jc + jr, ldc, alpha,
                        accumulate, std::min(kMR, mc - ir), cols);
          }
        }
      }
    }
  }
}


// ---- shifted-row products (convolution without im2col) ----------------------

void pack_rows8_avx512(bool trans_a, int64_t m, int64_t k, const float* a, int64_t lda,
                       float* dst) {
  pack_a(trans_a, a, lda, m, k, dst);
}

void gemm_shifted_b_avx512(int64_t m, int64_t n, int64_t k, const float* a_packed,
                           const float* b, const int64_t* b_off, float* c, int64_t ldc,
                           bool accumulate) {
  for (int64_t i0 = 0; i0 < m; i0 += kMR) {
    const float* panel = a_packed + (i0 / kMR) * k * kMR;
    const int64_t rows = std::min(kMR, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += kNR) {
      __m512 acc[kMR][2];
#pragma GCC unroll 8
      for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
      const float* ap = panel;
      const float* bj = b + j0;
      for (int64_t p = 0; p < k; ++p) {
        // The next panel, a panel's time ahead: the packed filters are
        // often out of cache (a pipeline's micro-batches stream every
        // layer's weights), and one panel's product is too short for the
        // hardware prefetcher to follow from memory.
        _mm_prefetch(reinterpret_cast<const char*>(ap + k * kMR), _MM_HINT_T0);
        const float* br = bj + b_off[p];
        const __m512 b0 = _mm512_loadu_ps(br);
        const __m512 b1 = _mm512_loadu_ps(br + 16);
#pragma GCC unroll 8
        for (int r = 0; r < kMR; ++r) {
          const __m512 av = _mm512_set1_ps(ap[r]);
          acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
          acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
        }
        ap += kMR;
      }
      store_tile_8x32(acc, c + i0 * ldc + j0, ldc, 1.f, accumulate, rows,
                      std::min(kNR, n - j0));
    }
  }
}

void gemm_shifted_a_avx512(int64_t m, int64_t n, int64_t len, int64_t segments,
                           const float* const* a, const int64_t* a_off, const float* const* b,
                           int64_t ldb, float* c, int64_t ldc) {
  for (int64_t j0 = 0; j0 < n; j0 += kNR) {
    const int64_t cols = std::min(kNR, n - j0);
    const uint32_t bits = cols >= 32 ? 0xFFFFFFFFu : ((1u << cols) - 1);
    const __mmask16 lo = static_cast<__mmask16>(bits & 0xFFFF);
    const __mmask16 hi = static_cast<__mmask16>(bits >> 16);
    for (int64_t i0 = 0; i0 < m; i0 += kMR) {
      __m512 acc[kMR][2];
#pragma GCC unroll 8
      for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
      for (int64_t s = 0; s < segments; ++s) {
        const float* ar[kMR];
        for (int r = 0; r < kMR; ++r) ar[r] = a[s] + a_off[std::min<int64_t>(i0 + r, m - 1)];
        const float* bp = b[s] + j0;
        // A register copy per segment: GCC otherwise keeps acc in memory
        // across the segment loop and stores it on every iteration.
        __m512 t[kMR][2];
#pragma GCC unroll 8
        for (int r = 0; r < kMR; ++r) t[r][0] = acc[r][0], t[r][1] = acc[r][1];
        for (int64_t p = 0; p < len; ++p, bp += ldb) {
          const __m512 b0 = _mm512_maskz_loadu_ps(lo, bp);
          const __m512 b1 = _mm512_maskz_loadu_ps(hi, bp + 16);
#pragma GCC unroll 8
          for (int r = 0; r < kMR; ++r) {
            const __m512 av = _mm512_set1_ps(ar[r][p]);
            t[r][0] = _mm512_fmadd_ps(av, b0, t[r][0]);
            t[r][1] = _mm512_fmadd_ps(av, b1, t[r][1]);
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < kMR; ++r) acc[r][0] = t[r][0], acc[r][1] = t[r][1];
      }
      store_tile_8x32(acc, c + i0 * ldc + j0, ldc, 1.f, true, std::min(kMR, m - i0), cols);
    }
  }
}

#pragma GCC pop_options

}  // namespace

void set_gemm_kernel(GemmKernel kernel) { g_kernel = static_cast<int>(kernel); }

bool gemm_uses_avx512() {
  return g_kernel.load() == static_cast<int>(GemmKernel::kAuto) && cpu_has_avx512();
}

namespace {

bool gemm_uses_onednn() {
  return g_kernel.load() == static_cast<int>(GemmKernel::kAuto) && !cpu_has_avx512();
}

// oneDNN's sgemm on `threads` OpenMP threads (1 inside a parallel region).
void sgemm_onednn(int threads, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                  float beta, float* c, int64_t ldc) {
  dnnl_status_t status;
  {
    OmpThreads scope(threads);
    status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                        ldb, beta, c, ldc);
  }
  LOOM_CHECK(status == dnnl_success, "gemm: oneDNN's sgemm failed (status ", int(status),
             ") for m=", m, " n=", n, " k=", k, " lda=", lda, " ldb=", ldb, " ldc=", ldc);
}

}  // namespace

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (gemm_uses_avx512()) {
      sgemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    if (gemm_uses_onednn() && k > 0) {
      sgemm_onednn(1, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
  }
  eigen_gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void gemm_parallel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
                   const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  const int64_t threads = get_num_threads();
  if constexpr (std::is_same_v<T, float>) {
    // oneDNN splits the work over its threads itself.
    if (gemm_uses_onednn() && k > 0 && !omp_in_parallel()) {
      sgemm_onednn(static_cast<int>(threads), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                   beta, c, ldc);
      return;
    }
  }
  const double flops = 2.0 * static_cast<double>(m) * n * std::max<int64_t>(k, 1);
  if (threads <= 1 || flops < 4e5) {
    gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Split the dim whose split duplicates less packing (each thread packs the
  // whole of the other operand), provided it has enough tiles.
  const int64_t tiles_m = (m + kMR - 1) / kMR, tiles_n = (n + kNR - 1) / kNR;
  bool split_n = n >= m;  // splitting n repacks A (m x k) per thread, m repacks B
  if (split_n && tiles_n < threads) split_n = false;
  if (!split_n && tiles_m < threads) split_n = tiles_n >= tiles_m;
  if (split_n) {
    parallel_for(0, tiles_n, (tiles_n + threads - 1) / threads, [&](int64_t t0, int64_t t1) {
      const int64_t j0 = t0 * kNR, j1 = std::min(n, t1 * kNR);
      gemm<T>(trans_a, trans_b, m, j1 - j0, k, alpha, a, lda,
              trans_b ? b + j0 * ldb : b + j0, ldb, beta, c + j0, ldc);
    });
  } else {
    parallel_for(0, tiles_m, (tiles_m + threads - 1) / threads, [&](int64_t t0, int64_t t1) {
      const int64_t i0 = t0 * kMR, i1 = std::min(m, t1 * kMR);
      gemm<T>(trans_a, trans_b, i1 - i0, n, k, alpha, trans_a ? a + i0 : a + i0 * lda, lda, b,
              ldb, beta, c + i0 * ldc, ldc);
    });
  }
}


bool shifted_kernels_available() { return gemm_uses_avx512(); }

void pack_rows8(bool trans_a, int64_t m, int64_t k, const float* a, int64_t lda, float* dst) {
  LOOM_CHECK(shifted_kernels_available(), "pack_rows8: needs the AVX-512 kernels");
  pack_rows8_avx512(trans_a, m, k, a, lda, dst);
}

void gemm_shifted_b(int64_t m, int64_t n, int64_t k, const float* a_packed, const float* b,
                    const int64_t* b_off, float* c, int64_t ldc, bool accumulate) {
  LOOM_CHECK(shifted_kernels_available(), "gemm_shifted_b: needs the AVX-512 kernels");
  if (m <= 0 || n <= 0) return;
  gemm_shifted_b_avx512(m, n, k, a_packed, b, b_off, c, ldc, accumulate);
}

void gemm_shifted_a(int64_t m, int64_t n, int64_t len, int64_t segments, const float* const* a,
                    const int64_t* a_off, const float* const* b, int64_t ldb, float* c,
                    int64_t ldc) {
  LOOM_CHECK(shifted_kernels_available(), "gemm_shifted_a: needs the AVX-512 kernels");
  if (m <= 0 || n <= 0 || len <= 0) return;
  gemm_shifted_a_avx512(m, n, len, segments, a, a_off, b, ldb, c, ldc);
}

#define LOOM_GEMM_INSTANTIATE(T)                                                              \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, \
                        int64_t, T, T*, int64_t);                                              \
  template void gemm_parallel<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t,  \
                                 const T*, int64_t, T, T*, int64_t);
LOOM_GEMM_INSTANTIATE(float)
LOOM_GEMM_INSTANTIATE(double)
LOOM_GEMM_INSTANTIATE(int64_t)
LOOM_GEMM_INSTANTIATE(int32_t)
#undef LOOM_GEMM_INSTANTIATE

}  // namespace cpu
}  // namespace loom
