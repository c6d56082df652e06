// CPU kernels for native::mm / bmm / linear on cpu::gemm (Gemm.h), and for
// bfloat16 on oneDNN's matmul (OneDnnMatmul.h) where the CPU has bfloat16
// kernels.  The only layout work is deciding how a strided 2-D view reaches
// the GEMM (native/GemmLayout.h): row-major (unit column stride), as a
// transpose (unit row stride), or, for anything else, as a contiguous copy.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "tensor/Factory.h"
#include "tensor/Parallel.h"
#include "tensor/cpu/Gemm.h"
#include "tensor/cpu/OneDnnMatmul.h"
#include "tensor/native/Copy.h"
#include "tensor/native/GemmLayout.h"
#include "tensor/native/Linalg.h"
#include "tensor/native/Reduce.h"

namespace loom {
namespace cpu {
namespace {

// A (rows, cols) matrix as the GEMM sees it: data, transpose flag, leading dim.
// For batched operands `batch_stride` steps from one matrix to the next.
struct GemmOperand {
  Tensor holder;  // the tensor `data` points into (maybe a contiguous copy)
  bool trans = false;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

// t is (rows, cols) or (batch, rows, cols).
GemmOperand gemm_operand(const Tensor& t) {
  const int64_t r = t.dim();
  const native::MatrixLayout l = native::matrix_layout(t.sizes()[r - 2], t.sizes()[r - 1],
                                                       t.strides()[r - 2], t.strides()[r - 1]);
  GemmOperand op;
  op.holder = l.copy ? native::contiguous(t) : t;
  op.trans = l.trans;
  op.ld = l.ld;
  if (r == 3) op.batch_stride = op.holder.strides()[0];
  return op;
}

// Calls fn(TypeTag<T>) for the dtypes the GEMM supports (the native ops
// have checked the dtype).
template <typename Fn>
void dispatch_gemm(DType dtype, Fn&& fn) {
  switch (dtype) {
    case kFloat32: return fn(TypeTag<float>{});
    case kFloat64: return fn(TypeTag<double>{});
    case kInt64: return fn(TypeTag<int64_t>{});
    case kInt32: return fn(TypeTag<int32_t>{});
    default: LOOM_FAIL("cpu gemm: unsupported dtype ", dtype_name(dtype));
  }
}

onednn::MatmulOperand matmul_operand(const GemmOperand& op) {
  return {op.holder.data_ptr(), op.trans, op.ld, op.batch_stride};
}

// bfloat16 through oneDNN: out (batch, m, n) = a @ b (+ out).
void bfloat16_product(const GemmOperand& oa, const GemmOperand& ob, int64_t batch, int64_t m,
                      int64_t n, int64_t k, const Tensor& out, bool accumulate) {
  if (out.numel() == 0) return;
  if (k == 0) {  // an empty sum
    if (!accumulate) native::fill_(out, 0);
    return;
  }
  onednn::matmul(kBFloat16, batch, m, n, k, matmul_operand(oa), matmul_operand(ob),
                 out.data_ptr(), accumulate);
}

void gemm_kernel(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const GemmOperand oa = gemm_operand(a), ob = gemm_operand(b);
  if (out.dtype() == kBFloat16) return bfloat16_product(oa, ob, 1, m, n, k, out, accumulate);
  dispatch_gemm(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    gemm_parallel<T>(oa.trans, ob.trans, m, n, k, T(1),
                     static_cast<const T*>(oa.holder.data_ptr()), oa.ld,
                     static_cast<const T*>(ob.holder.data_ptr()), ob.ld,
                     accumulate ? T(1) : T(0), static_cast<T*>(out.data_ptr()), n);
  });
}

void bmm_kernel(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  const GemmOperand oa = gemm_operand(a), ob = gemm_operand(b);
  if (out.dtype() == kBFloat16) return bfloat16_product(oa, ob, batch, m, n, k, out, false);
  dispatch_gemm(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = static_cast<const T*>(oa.holder.data_ptr());
    const T* pb = static_cast<const T*>(ob.holder.data_ptr());
    T* pc = static_cast<T*>(out.data_ptr());
    auto one = [&](int64_t i, bool parallel) {
      auto* f = parallel ? &gemm_parallel<T> : &gemm<T>;
      f(oa.trans, ob.trans, m, n, k, T(1), pa + i * oa.batch_stride, oa.ld,
        pb + i * ob.batch_stride, ob.ld, T(0), pc + i * m * n, n);
    };
    if (batch >= get_num_threads()) {
      const int64_t work = std::max<int64_t>(1, m * n * std::max<int64_t>(k, 1));
      parallel_for(0, batch, std::max<int64_t>(1, 65536 / work), [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i) one(i, false);
      });
    } else {
      for (int64_t i = 0; i < batch; ++i) one(i, true);
    }
  });
}

Tensor sum_rows_kernel(const Tensor& matrix) {
  // bfloat16 (oneDNN products): the reduction accumulates in float32.
  if (matrix.dtype() == kBFloat16)
    return native::to(native::sum(matrix, {0}, false), matrix.device(), kBFloat16);
  const int64_t m = matrix.size(0), n = matrix.size(1);
  const Tensor g = native::contiguous(matrix);
  Tensor out = empty({n}, TensorOptions(g.dtype()).device(g.device()));
  dispatch_gemm(g.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    const T* src = static_cast<const T*>(g.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(m, 1)),
                 [&](int64_t j0, int64_t j1) {
                   std::vector<Acc> acc(j1 - j0, Acc(0));
                   for (int64_t i = 0; i < m; ++i)
                     for (int64_t j = j0; j < j1; ++j) acc[j - j0] += src[i * n + j];
                   for (int64_t j = j0; j < j1; ++j) dst[j] = static_cast<T>(acc[j - j0]);
                 });
  });
  return out;
}

// bfloat16 goes to oneDNN as it is where the CPU has bfloat16 kernels.
bool gemm_takes_kernel(DType dtype) {
  return dtype == kBFloat16 && onednn::bf16_matmul_available();
}

}  // namespace

static const native::RegisterKernel reg_gemm(native::gemm_stub, kCPU, &gemm_kernel);
static const native::RegisterKernel reg_gemm_takes(native::gemm_takes_stub, kCPU,
                                                   &gemm_takes_kernel);
static const native::RegisterKernel reg_bmm(native::bmm_stub, kCPU, &bmm_kernel);
static const native::RegisterKernel reg_sum_rows(native::sum_rows_stub, kCPU, &sum_rows_kernel);

}  // namespace cpu
}  // namespace loom
