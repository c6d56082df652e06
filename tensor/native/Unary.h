// Raw unary elementwise ops (neg, abs, exp, ..., pow with a scalar exponent,
// clamp) and the fused kernels their backward rules use.
//
// dtype rules follow PyTorch: the transcendental ops (exp, log, sqrt, rsqrt,
// sigmoid, tanh) compute integer and bool inputs as float32; neg, abs, relu
// and clamp keep integer dtypes and reject bool.  The in-place forms (unary_,
// clamp_) throw when the result dtype is not self's.  Inputs may have any
// layout; outputs are new contiguous tensors.  Device checks here, the
// per-element work in the backend (tensor/cpu/Unary.cpp, or for CUDA tensors
// tensor/cuda/Unary.cu and UnaryBackward.cu).
#pragma once

#include <optional>

#include "tensor/Tensor.h"

namespace loom {
namespace native {

enum class UnaryOp {
  kNeg,
  kAbs,
  kSign,  // -1, 0 or 1 (0 for nan)
  kExp,
  kLog,
  kSqrt,
  kRsqrt,  // 1 / sqrt(x)
  kRelu,   // max(x, 0); nan stays nan
  kSigmoid,
  kTanh,
};

const char* unary_op_name(UnaryOp op);
// The dtype of op(x) for an input of `dtype`; throws for bool where the op
// does not apply (neg, abs, relu).
DType unary_result_dtype(UnaryOp op, DType dtype);

Tensor unary(UnaryOp op, const Tensor& self);
// self = op(self).  Bumps self's version.
void unary_(UnaryOp op, const Tensor& self);

// self ** exponent.  Integer tensors stay integral for an integral exponent
// (a negative one throws); a fractional exponent gives float32.
Tensor pow(const Tensor& self, Scalar exponent);
// min(max(self, min), max); either bound may be absent, not both.  A
// fractional bound on an integer tensor gives float32.
Tensor clamp(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);
void clamp_(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);

// ---- fused backward kernels -----------------------------------------------------
// `grad` and `saved` have one shape; the result has saved's (floating) dtype.
enum class UnaryBackwardOp {
  kRelu,     // saved = output:  grad * (out > 0)
  kSigmoid,  // saved = output:  grad * out * (1 - out)
  kTanh,     // saved = output:  grad * (1 - out^2)
  kSqrt,     // saved = output:  grad / (2 * out)
  kRsqrt,    // saved = output:  -0.5 * grad * out^3
  kAbs,      // saved = input:   grad * sign(x)
};
Tensor unary_backward(UnaryBackwardOp op, const Tensor& grad, const Tensor& saved);
// grad * exponent * self^(exponent - 1) (zero for exponent 0).
Tensor pow_backward(const Tensor& grad, const Tensor& self, double exponent);
// grad where min <= self <= max (absent bounds always pass), else 0.
Tensor clamp_backward(const Tensor& grad, const Tensor& self, std::optional<Scalar> min,
                      std::optional<Scalar> max);

}  // namespace native

namespace cpu {
// out = op(in); both of out's shape and dtype.
void unary_kernel(native::UnaryOp op, const Tensor& out, const Tensor& in);
void pow_scalar_kernel(const Tensor& out, const Tensor& in, Scalar exponent);
void clamp_kernel(const Tensor& out, const Tensor& in, std::optional<Scalar> min,
                  std::optional<Scalar> max);
// out = f(grad, saved); all three of one shape and dtype.
void unary_backward_kernel(native::UnaryBackwardOp op, const Tensor& out, const Tensor& grad,
                           const Tensor& saved);
void pow_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& self,
                         double exponent);
void clamp_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& self,
                           std::optional<Scalar> min, std::optional<Scalar> max);
}  // namespace cpu

namespace cuda {
// The same kernels for tensors on one CUDA device (tensor/native/CudaElementwise.cpp),
// queued on its current stream.
void unary_kernel(native::UnaryOp op, const Tensor& out, const Tensor& in);
void pow_scalar_kernel(const Tensor& out, const Tensor& in, Scalar exponent);
void clamp_kernel(const Tensor& out, const Tensor& in, std::optional<Scalar> min,
                  std::optional<Scalar> max);
void unary_backward_kernel(native::UnaryBackwardOp op, const Tensor& out, const Tensor& grad,
                           const Tensor& saved);
void pow_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& self,
                         double exponent);
void clamp_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& self,
                           std::optional<Scalar> min, std::optional<Scalar> max);
}  // namespace cuda
}  // namespace loom
