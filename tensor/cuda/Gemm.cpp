// The CUDA backend of the matrix products: kernels for the dispatch slots of
// native/Linalg.h.  Each operand's layout is decided by the same rule as on
// the CPU (GemmLayout.h: row-major or transposed views go in as they are,
// anything else is copied contiguous once), then mapped onto one
// column-major cublasGemmStridedBatchedEx call (column_major_gemm: C^T =
// B^T A^T) on the device's current stream.
#include <climits>

#include "tensor/CudaFlags.h"
#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Gemm.h"
#include "tensor/native/Copy.h"
#include "tensor/native/GemmLayout.h"
#include "tensor/native/Linalg.h"
#include "tensor/native/Reduce.h"

namespace loom {
namespace cuda {
namespace {

// One operand: the tensor whose data the GEMM reads and its layout.
struct Operand {
  Tensor holder;
  native::MatrixLayout layout;
  int64_t batch_stride = 0;
};

Operand operand(const Tensor& t) {
  const int64_t r = t.dim();
  Operand op;
  op.holder = t;
  op.layout = native::matrix_layout(t.size(r - 2), t.size(r - 1), t.stride(r - 2), t.stride(r - 1));
  if (op.layout.copy) {
    op.holder = native::contiguous(t);
    op.layout = native::matrix_layout(t.size(r - 2), t.size(r - 1), op.holder.stride(r - 2),
                                      op.holder.stride(r - 1));
  }
  if (r == 3) op.batch_stride = op.holder.stride(0);
  return op;
}

void check_int(int64_t v, const char* what, const Tensor& a, const Tensor& b) {
  LOOM_CHECK(v >= 0 && v <= INT_MAX, "CUDA gemm: ", what, " = ", v,
             " exceeds cuBLAS's 32-bit limit for operands ", a.describe(), " and ",
             b.describe());
}

}  // namespace

void gemm_kernel(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const int64_t r = out.dim();
  const int64_t batch = r == 3 ? out.size(0) : 1;
  const int64_t m = a.size(r - 2), k = a.size(r - 1), n = b.size(r - 1);
  if (out.numel() == 0) return;
  if (k == 0) {  // an empty sum: 0, or out unchanged when accumulating
    if (!accumulate) native::fill_(out, 0);
    return;
  }
  const Operand oa = operand(a), ob = operand(b);
  const native::ColumnMajorGemm g = native::column_major_gemm(oa.layout, ob.layout, m, k, n);
  GemmArgs args;
  args.trans_a = g.trans_first;
  args.trans_b = g.trans_second;
  args.m = g.m;
  args.n = g.n;
  args.k = g.k;
  args.a = ob.holder.data_ptr();  // cuBLAS's first operand is b (C^T = B^T A^T)
  args.lda = g.ld_first;
  args.stride_a = ob.batch_stride;
  args.b = oa.holder.data_ptr();
  args.ldb = g.ld_second;
  args.stride_b = oa.batch_stride;
  args.c = out.data_ptr();
  args.ldc = g.ldc;
  args.stride_c = m * n;
  args.batch = batch;
  args.accumulate = accumulate;
  for (const auto& [v, what] : {std::pair<int64_t, const char*>{m, "rows"}, {n, "columns"},
                                {k, "inner size"}, {args.lda, "leading dim"},
                                {args.ldb, "leading dim"}, {batch, "batch"}})
    check_int(v, what, a, b);
  const int device = out.device().index;
  GemmMath math;
  math.allow_tf32 = matmul_allow_tf32();
  math.allow_reduced_precision_reduction =
      out.dtype() == kBFloat16 ? matmul_allow_bf16_reduced_precision_reduction()
                               : matmul_allow_fp16_reduced_precision_reduction();
  gemm(out.dtype(), args, math, device, current_stream_handle(device));
}

// bmm: the batched operands go to the same strided-batched call.
void bmm_kernel(const Tensor& a, const Tensor& b, const Tensor& out) {
  gemm_kernel(a, b, out, false);
}

// The column sums of a matrix as one reduction kernel.
Tensor sum_rows_kernel(const Tensor& matrix) {
  return native::to(native::sum(matrix, {0}, false), matrix.device(), matrix.dtype());
}

// float16 and bfloat16 go to cuBLAS as they are (tensor cores, float32 accumulation).
bool gemm_takes_kernel(DType dtype) { return dtype == kFloat16 || dtype == kBFloat16; }

static const native::RegisterKernel reg_gemm(native::gemm_stub, kCUDA, &gemm_kernel);
static const native::RegisterKernel reg_gemm_takes(native::gemm_takes_stub, kCUDA,
                                                   &gemm_takes_kernel);
static const native::RegisterKernel reg_bmm(native::bmm_stub, kCUDA, &bmm_kernel);
static const native::RegisterKernel reg_sum_rows(native::sum_rows_stub, kCUDA, &sum_rows_kernel);

}  // namespace cuda
}  // namespace loom
