// The host half of the CUDA GEMM (tensor/native/GemmLayout.h), no GPU needed:
// which strided views go to a GEMM as they are (row-major or transposed, with
// which leading dimension) and which are copied, and the row-major ->
// column-major mapping that cuBLAS gets.  The mapping is checked end to end:
// a reference column-major GEMM (cuBLAS's definition, on raw pointers) runs
// with exactly the arguments tensor/cuda/Gemm.cpp would pass, on the views' own
// memory, and must equal a naive row-major product -- for every combination
// of plain, transposed, padded (ld > cols) and sliced operands, odd sizes
// and the size-1 edge cases.
#include <vector>

#include "tensor/native/GemmLayout.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using native::ColumnMajorGemm;
using native::MatrixLayout;
using native::column_major_gemm;
using native::matrix_layout;

TEST(GemmLayout, RowMajorTransposedAndCopied) {
  // Contiguous (3, 5): row-major, ld 5.
  MatrixLayout l = matrix_layout(3, 5, 5, 1);
  EXPECT_FALSE(l.copy);
  EXPECT_FALSE(l.trans);
  EXPECT_EQ(l.ld, 5);
  // A row-major view padded to 8 columns (a narrow of a wider matrix).
  l = matrix_layout(3, 5, 8, 1);
  EXPECT_FALSE(l.trans);
  EXPECT_EQ(l.ld, 8);
  // The transpose of a contiguous (5, 3): (3, 5) with strides (1, 3).
  l = matrix_layout(3, 5, 1, 3);
  EXPECT_FALSE(l.copy);
  EXPECT_TRUE(l.trans);
  EXPECT_EQ(l.ld, 3);
  // Every other column (stride 2 along the row): copied.
  l = matrix_layout(3, 5, 10, 2);
  EXPECT_TRUE(l.copy);
  EXPECT_EQ(l.ld, 5);
  // Overlapping rows (row stride < cols): copied, never passed as a GEMM operand.
  EXPECT_TRUE(matrix_layout(3, 5, 2, 1).copy);
  // Broadcast rows (row stride 0): copied.
  EXPECT_TRUE(matrix_layout(3, 5, 0, 1).copy);
}

TEST(GemmLayout, SizeOneDimsIgnoreTheirStride) {
  // One row: any row stride; ld is the column count.
  MatrixLayout l = matrix_layout(1, 7, 12345, 1);
  EXPECT_FALSE(l.copy);
  EXPECT_FALSE(l.trans);
  EXPECT_EQ(l.ld, 7);
  // One column with unit row stride: transposed, ld = rows.
  l = matrix_layout(6, 1, 1, 999);
  EXPECT_FALSE(l.copy);
  EXPECT_EQ(l.ld, l.trans ? 6 : 1);
  // 1 x 1 and empty matrices never need a copy and keep ld >= 1.
  EXPECT_FALSE(matrix_layout(1, 1, 0, 0).copy);
  EXPECT_GE(matrix_layout(0, 4, 4, 1).ld, 1);
  EXPECT_GE(matrix_layout(4, 0, 1, 1).ld, 1);
}

// cuBLAS's column-major GEMM, C (m, n) = op(A) (m, k) @ op(B) (k, n).
void reference_column_major(const ColumnMajorGemm& g, const double* a, const double* b,
                            double* c) {
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < g.k; ++l) {
        const double av = g.trans_first ? a[l + i * g.ld_first] : a[i + l * g.ld_first];
        const double bv = g.trans_second ? b[j + l * g.ld_second] : b[l + j * g.ld_second];
        acc += av * bv;
      }
      c[i + j * g.ldc] = acc;
    }
}

// cuBLAS's own argument checks (lda >= max(1, rows of the stored matrix)).
void expect_valid_leading_dims(const ColumnMajorGemm& g) {
  EXPECT_GE(g.ld_first, std::max<int64_t>(1, g.trans_first ? g.k : g.m));
  EXPECT_GE(g.ld_second, std::max<int64_t>(1, g.trans_second ? g.n : g.k));
  EXPECT_GE(g.ldc, std::max<int64_t>(1, g.m));
}

// A (rows, cols) float64 view in one of four layouts, all over fresh memory.
enum class Kind { kPlain, kTransposed, kPadded, kPaddedTransposed, kEveryOtherColumn };

Tensor make_view(Kind kind, int64_t rows, int64_t cols, uint64_t seed) {
  Generator gen(seed);
  switch (kind) {
    case Kind::kPlain: return rand({rows, cols}, kFloat64, &gen);
    case Kind::kTransposed: return rand({cols, rows}, kFloat64, &gen).transpose(0, 1);
    case Kind::kPadded: return rand({rows, cols + 3}, kFloat64, &gen).narrow(1, 1, cols);
    case Kind::kPaddedTransposed:
      return rand({cols, rows + 2}, kFloat64, &gen).narrow(1, 2, rows).transpose(0, 1);
    case Kind::kEveryOtherColumn:
      return rand({rows, 2 * cols}, kFloat64, &gen).slice(1, 0, 2 * cols, 2);
  }
  return Tensor();
}

TEST(GemmLayout, ColumnMajorCallComputesTheRowMajorProduct) {
  const Kind kinds[] = {Kind::kPlain, Kind::kTransposed, Kind::kPadded,
                        Kind::kPaddedTransposed, Kind::kEveryOtherColumn};
  const std::vector<std::vector<int64_t>> shapes = {
      {3, 5, 4}, {1, 7, 3}, {6, 1, 5}, {4, 3, 1}, {1, 1, 1}, {17, 9, 13}};
  int seed = 0;
  for (const auto& s : shapes)
    for (Kind ka : kinds)
      for (Kind kb : kinds) {
        const int64_t m = s[0], k = s[1], n = s[2];
        Tensor a = make_view(ka, m, k, ++seed), b = make_view(kb, k, n, ++seed);
        MatrixLayout la = matrix_layout(m, k, a.stride(0), a.stride(1));
        MatrixLayout lb = matrix_layout(k, n, b.stride(0), b.stride(1));
        // What tensor/cuda/Gemm.cpp does for a copied operand.
        if (la.copy) a = a.contiguous(), la = matrix_layout(m, k, a.stride(0), a.stride(1));
        if (lb.copy) b = b.contiguous(), lb = matrix_layout(k, n, b.stride(0), b.stride(1));
        ASSERT_FALSE(la.copy || lb.copy);
        const ColumnMajorGemm g = column_major_gemm(la, lb, m, k, n);
        EXPECT_EQ(g.m, n);
        EXPECT_EQ(g.n, m);
        EXPECT_EQ(g.k, k);
        expect_valid_leading_dims(g);
        Tensor out = zeros({m, n}, kFloat64);
        reference_column_major(g, static_cast<const double*>(b.data_ptr()),
                               static_cast<const double*>(a.data_ptr()),
                               static_cast<double*>(out.data_ptr()));
        EXPECT_TRUE(testing::AllClose(out, a.mm(b), 1e-12, 1e-12))
            << "m k n = " << m << " " << k << " " << n << ", kinds " << static_cast<int>(ka)
            << " " << static_cast<int>(kb);
      }
}

TEST(GemmLayout, TransposedOperandsAreNotCopied) {
  // The backward of mm multiplies by transposes: both must reach cuBLAS as op T.
  const Tensor w = rand({4, 6}, kFloat64);
  const Tensor wt = w.transpose(0, 1);  // (6, 4), strides (1, 6)
  const MatrixLayout l = matrix_layout(6, 4, wt.stride(0), wt.stride(1));
  EXPECT_FALSE(l.copy);
  EXPECT_TRUE(l.trans);
  const MatrixLayout g = matrix_layout(3, 6, 6, 1);
  const ColumnMajorGemm c = column_major_gemm(g, l, 3, 6, 4);
  EXPECT_TRUE(c.trans_first);    // b = w^T: op T on the first cuBLAS operand
  EXPECT_FALSE(c.trans_second);  // a row-major: op N
  EXPECT_LOOM_ERROR(column_major_gemm(matrix_layout(3, 5, 10, 2), g, 3, 5, 6), "copied");
}

}  // namespace
}  // namespace loom
