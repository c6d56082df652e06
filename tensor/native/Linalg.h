// Raw (non-differentiable) matrix products.  Argument checks, dtype and
// device checks and output allocation live here; the arithmetic is
// cpu::gemm (tensor/cpu/Gemm.h).  Inputs may be any strided layout: a
// transposed matrix is passed to the GEMM as a transpose flag, anything else
// non-unit-strided is copied once.
#pragma once

#include "tensor/Tensor.h"

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
// is set (else undefined).
void linear_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                     bool need_input, bool need_weight, bool need_bias, Tensor& grad_input,
                     Tensor& grad_weight, Tensor& grad_bias);

}  // namespace native

namespace cuda {
// The CUDA backend of the products (tensor/native/CudaLinalg.cpp, cuBLAS via
// tensor/cuda/Gemm.cu): out = a @ b (+ out when accumulate) for a (m, k) and
// b (k, n), or batched a (B, m, k) and b (B, k, n), of any strides (a batch
// stride of 0 is used as is); out (m, n) / (B, m, n) contiguous, all of one
// dtype on one CUDA device.  TF32 per cuda::matmul_allow_tf32().  Queued on
// the device's current stream.
void gemm_kernel(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate);
}  // namespace cuda
}  // namespace loom
