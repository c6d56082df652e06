// Raw (non-differentiable) matrix products.  Argument checks, dtype and
// device checks and output allocation live here; the arithmetic is
// cpu::gemm (tensor/cpu/Gemm.h).  Inputs may be any strided layout: a
// transposed matrix is passed to the GEMM as a transpose flag, anything else
// non-unit-strided is copied once.
#pragma once

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// (n, k) @ (k, m) -> (n, m).  float32/float64/int32/int64.
Tensor mm(const Tensor& self, const Tensor& other);
// (b, n, k) @ (b, k, m) -> (b, n, m).
Tensor bmm(const Tensor& self, const Tensor& other);
// input (..., in) @ weight (out, in)^T + bias (out) -> (..., out); bias may
// be undefined.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias);
// The gradients of linear for grad_output (..., out): grad_input (..., in),
// grad_weight (out, in), grad_bias (out); each computed only when its flag
// is set (else undefined).  grad_output may differ from input in dtype (it
// is converted); throws loom::Error on a shape or device that is not
// linear's output's.
void linear_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                     bool need_input, bool need_weight, bool need_bias, Tensor& grad_input,
                     Tensor& grad_weight, Tensor& grad_bias);

// ---- kernels (one slot per device type) -----------------------------------------
// dtypes are float32, float64, int32 or int64 (the native ops check), and
// float16/bfloat16 where the device's gemm_takes says so (else the ops
// compute those in float32 and round once).
// out (m, n) = a (m, k) @ b (k, n), plus out itself when accumulate; a and b
// 2-D of out's dtype with any strides, out contiguous.
using MatmulKernel = void (*)(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate);
// out (batch, m, n) = a (batch, m, k) @ b (batch, k, n) per batch entry; a
// and b any strides, out contiguous.
using BmmKernel = void (*)(const Tensor& a, const Tensor& b, const Tensor& out);
// The (n) column sums of a (m, n) matrix (linear's bias gradient).
using SumRowsKernel = Tensor (*)(const Tensor& matrix);

// Whether the device's GEMM kernels take a 16-bit float dtype as it is.
using GemmTakesKernel = bool (*)(DType dtype);

extern DispatchStub<MatmulKernel> gemm_stub;
extern DispatchStub<GemmTakesKernel> gemm_takes_stub;
extern DispatchStub<BmmKernel> bmm_stub;
extern DispatchStub<SumRowsKernel> sum_rows_stub;

}  // namespace native
}  // namespace loom
