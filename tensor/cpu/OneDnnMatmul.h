// bfloat16 matrix products on the CPU through oneDNN's matmul primitive,
// which runs them on AMX tiles or AVX512-BF16 dot products where the CPU has
// them (float32 accumulation, one rounding into the bfloat16 output).
//
// The GEMM kernels (tensor/cpu/Linalg.cpp) send bfloat16 here when
// bf16_matmul_available(); elsewhere (oneDNN would run its reference loops)
// the native ops compute bfloat16 products in float32 and round once.
// oneDNN runs on the calling thread's intra-op thread count; primitives are
// made once per shape and layout and kept (bounded), as for convolutions.
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cpu {
namespace onednn {

// Whether oneDNN has a bfloat16 matmul kernel on this CPU other than its
// reference loops (asked once).
bool bf16_matmul_available();

// One operand of a (batched) product: op(X) is (rows, cols); X is stored
// row-major with leading dim `ld` (trans: X^T is, i.e. element (i, j) at
// j * ld + i), matrices `batch_stride` elements apart (0: one matrix for
// every batch entry).
struct MatmulOperand {
  const void* data = nullptr;
  bool trans = false;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// c[p] (m, n, row-major, contiguous, batch stride m * n) = a[p] (m, k) @
// b[p] (k, n), plus c[p] itself when accumulate, for p < batch; dtype
// bfloat16, m, n, k > 0.
void matmul(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, const MatmulOperand& a,
            const MatmulOperand& b, void* c, bool accumulate);

}  // namespace onednn
}  // namespace cpu
}  // namespace loom
