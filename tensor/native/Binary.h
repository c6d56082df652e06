// Raw binary elementwise ops: broadcasting, type promotion and device checks
// here; the per-element work in the backend's kernel (tensor/cpu/Binary.cpp).
#pragma once

#include "tensor/Tensor.h"

namespace loom {
namespace native {

enum class BinaryOp {
  kAdd,  // a + alpha * b
  kSub,  // a - alpha * b
  kMul,
  kDiv,
  kPow,
  kMaximum,
  kMinimum,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
};

const char* binary_op_name(BinaryOp op);
bool is_comparison(BinaryOp op);
// The dtype of `a op b` under PyTorch's promotion rules (0-dim tensors do not
// raise the category's width; integer division gives float32).
DType result_dtype(BinaryOp op, const Tensor& a, const Tensor& b);
// A 0-dim tensor for `value` next to `like`: like's dtype, or float32 when a
// fractional value meets an integer tensor.
Tensor wrap_scalar(Scalar value, const Tensor& like);

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha = 1);
// self = self op other, in place (other broadcast to self's shape; the result
// dtype must be self's).  Bumps self's version.
void binary_(BinaryOp op, const Tensor& self, const Tensor& other, Scalar alpha = 1);

}  // namespace native

namespace cpu {
// out = a op b; all three already of out's shape; a and b of `compute` dtype.
void binary_kernel(native::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                   Scalar alpha);
}  // namespace cpu
}  // namespace loom
