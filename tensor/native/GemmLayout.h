// How a strided matrix reaches a BLAS GEMM, shared by the CPU (cpu::gemm,
// row-major) and CUDA (cuBLAS, column-major) backends of tensor/native/Linalg.
//
// A (rows, cols) view with strides (row_stride, col_stride) is passed without
// a copy when one of its strides is 1: row-major (unit column stride, leading
// dimension = the row stride) or as a transpose (unit row stride, leading
// dimension = the column stride).  Anything else is copied to a contiguous
// matrix once.  Size-1 dims may have any stride (they are never stepped).
//
// cuBLAS is column-major: a row-major C (m, n) is the column-major C^T
// (n, m), so C = A @ B is computed as C^T = B^T @ A^T, i.e. cuBLAS's first
// operand is B and its second A.  A row-major operand read column-major is
// already its own transpose (op N); a "transposed" (column-major) operand
// needs op T.  column_major_gemm does that mapping.  Plain C++, so CI tests it
// without a GPU (tests/tensor/gemm_layout_test.cpp).
#pragma once

#include <cstdint>

namespace loom {
namespace native {

// How one (rows, cols) operand is handed to a row-major GEMM.
struct MatrixLayout {
  bool copy = false;   // strides fit neither layout: pass contiguous(t) instead
  bool trans = false;  // stored column-major (unit row stride)
  int64_t ld = 1;      // leading dimension (elements between rows, or columns when trans)
};

// The layout of a (rows, cols) view with the given strides.  When `copy` is
// set, trans is false and ld is that of the contiguous copy (max(cols, 1)).
MatrixLayout matrix_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// The arguments of one column-major GEMM (cuBLAS order):
//   C' (m, n, ldc) = op(first) (m, k) @ op(second) (k, n)
// computing the row-major out (rows, cols) = a (rows, inner) @ b (inner, cols).
struct ColumnMajorGemm {
  bool trans_first = false, trans_second = false;  // op T (else op N)
  int64_t m = 0, n = 0, k = 0;
  int64_t ld_first = 1, ld_second = 1, ldc = 1;
  // first is b's data and second a's (always: the swap is the whole trick).
};

// a (rows, inner) with layout la, b (inner, cols) with layout lb (neither
// with copy set), out contiguous (rows, cols).
ColumnMajorGemm column_major_gemm(const MatrixLayout& la, const MatrixLayout& lb, int64_t rows,
                                  int64_t inner, int64_t cols);

}  // namespace native
}  // namespace loom
