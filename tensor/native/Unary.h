// Raw unary elementwise ops: the ops of the unary table (UnaryOps.h: neg,
// abs, exp, ..., relu, gelu, ...), pow with a scalar exponent, and clamp, with
// their backward kernels.
//
// dtype rules follow PyTorch and come from the table (optable::UnaryDType):
// transcendental ops compute integer and bool inputs as float32, neg, abs and
// relu keep integer dtypes and reject bool, the activations reject
// non-floating inputs.  The in-place forms (unary_, clamp_) throw when the
// result dtype is not self's.  Inputs may have any layout; outputs are new
// contiguous tensors.  The checks are here; the per-element work is the
// backend's, reached through the dispatch slots below (tensor/cpu/Unary.cpp,
// tensor/cuda/Elementwise.cpp).
#pragma once

#include <optional>

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"
#include "tensor/native/UnaryOps.h"

namespace loom {
namespace native {

using optable::UnaryArgs;

// The op's name in the table ("relu", "gelu_tanh", ...).
const char* unary_op_name(UnaryOp op);
// The dtype of op(x) for an input of `dtype`; throws where the op's rule
// rejects the dtype (bool for neg/abs/relu, non-floating for activations).
DType unary_result_dtype(UnaryOp op, DType dtype);

Tensor unary(UnaryOp op, const Tensor& self, const UnaryArgs& args = {});
// self = op(self).  Bumps self's version.
void unary_(UnaryOp op, const Tensor& self, const UnaryArgs& args = {});
// The op's derivative as one fused pass: optable::<Op>::backward(grad, saved)
// per element, saved being the forward's input or output as the table says.
// grad and saved have one shape; the result has saved's (floating) dtype.
Tensor unary_backward(UnaryOp op, const Tensor& grad, const Tensor& saved,
                      const UnaryArgs& args = {});

// self ** exponent.  Integer tensors stay integral for an integral exponent
// (a negative one throws); a fractional exponent gives float32.
Tensor pow(const Tensor& self, Scalar exponent);
// min(max(self, min), max); either bound may be absent, not both.  A
// fractional bound on an integer tensor gives float32.
Tensor clamp(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);
void clamp_(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);
// grad * exponent * self^(exponent - 1) (zero for exponent 0).
Tensor pow_backward(const Tensor& grad, const Tensor& self, double exponent);
// grad where min <= self <= max (absent bounds always pass), else 0.
Tensor clamp_backward(const Tensor& grad, const Tensor& self, std::optional<Scalar> min,
                      std::optional<Scalar> max);

// ---- kernels (one slot per device type) -----------------------------------------
// out = op(in); both of out's shape and dtype.
using UnaryKernel = void (*)(UnaryOp op, const UnaryArgs& args, const Tensor& out,
                             const Tensor& in);
// out = op's backward(grad, saved); all three of one shape and floating dtype.
using UnaryBackwardKernel = void (*)(UnaryOp op, const UnaryArgs& args, const Tensor& out,
                                     const Tensor& grad, const Tensor& saved);
using PowScalarKernel = void (*)(const Tensor& out, const Tensor& in, Scalar exponent);
using ClampKernel = void (*)(const Tensor& out, const Tensor& in, std::optional<Scalar> min,
                             std::optional<Scalar> max);
using PowBackwardKernel = void (*)(const Tensor& out, const Tensor& grad, const Tensor& self,
                                   double exponent);
using ClampBackwardKernel = void (*)(const Tensor& out, const Tensor& grad, const Tensor& self,
                                     std::optional<Scalar> min, std::optional<Scalar> max);

extern DispatchStub<UnaryKernel> unary_stub;
extern DispatchStub<UnaryBackwardKernel> unary_backward_stub;
extern DispatchStub<PowScalarKernel> pow_scalar_stub;
extern DispatchStub<ClampKernel> clamp_stub;
extern DispatchStub<PowBackwardKernel> pow_backward_stub;
extern DispatchStub<ClampBackwardKernel> clamp_backward_stub;

}  // namespace native
}  // namespace loom
