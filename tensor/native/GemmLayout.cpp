#include "tensor/native/GemmLayout.h"

#include <algorithm>

#include "tensor/Error.h"

namespace loom {
namespace native {

MatrixLayout matrix_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  MatrixLayout l;
  const int64_t r1 = std::max<int64_t>(rows, 1), c1 = std::max<int64_t>(cols, 1);
  if ((cols <= 1 || col_stride == 1) && (rows <= 1 || row_stride >= c1)) {
    l.ld = rows <= 1 ? c1 : row_stride;
  } else if ((rows <= 1 || row_stride == 1) && (cols <= 1 || col_stride >= r1)) {
    l.trans = true;
    l.ld = cols <= 1 ? r1 : col_stride;
  } else {
    l.copy = true;
    l.ld = c1;
  }
  return l;
}

ColumnMajorGemm column_major_gemm(const MatrixLayout& la, const MatrixLayout& lb, int64_t rows,
                                  int64_t inner, int64_t cols) {
  LOOM_CHECK(!la.copy && !lb.copy, "column_major_gemm: operands must be copied first");
  ColumnMajorGemm g;
  // out^T (cols, rows) = b^T (cols, inner) @ a^T (inner, rows).  A row-major
  // b with leading dim ld is, read column-major, b^T (cols, inner) itself: op
  // N.  A column-major b is b (inner, cols) column-major: op T gives b^T.
  g.m = cols;
  g.n = rows;
  g.k = inner;
  g.trans_first = lb.trans;
  g.ld_first = lb.ld;
  g.trans_second = la.trans;
  g.ld_second = la.ld;
  g.ldc = std::max<int64_t>(cols, 1);
  return g;
}

}  // namespace native
}  // namespace loom
