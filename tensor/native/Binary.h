// Raw binary elementwise ops, the ops of the binary table (BinaryOps.h: add,
// sub, mul, div, pow, maximum, minimum and the comparisons): broadcasting,
// type promotion and device checks here; the per-element work in the
// backends' kernels (tensor/cpu/Binary.cpp, tensor/cuda/Binary.cu), reached
// through the dispatch slots below.  Every dtype runs on both.
#pragma once

#include "tensor/Tensor.h"
#include "tensor/native/BinaryOps.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

using optable::BinaryArgs;

// The op's name in the table ("add", "maximum", "ge", ...).
const char* binary_op_name(BinaryOp op);
// Whether the op compares (a bool result, no gradient).
bool is_comparison(BinaryOp op);
// The dtype two operands compute in under PyTorch's promotion rules: the
// wider of the two, except that a 0-dim operand only counts when it is of a
// higher category (bool < integer < floating) than a dimensioned one, and an
// integer tensor meeting a floating 0-dim one gives float32.
DType promoted_dtype(const Tensor& a, const Tensor& b);
// The dtype of `a op b` under PyTorch's promotion rules (0-dim tensors do not
// raise the category's width; integer division gives float32).
DType result_dtype(BinaryOp op, const Tensor& a, const Tensor& b);
// t itself when it already has `shape`, else an expanded view (saves a view
// per operand in the common no-broadcast case).
Tensor expand_to(const Tensor& t, const IntList& shape);
// A 0-dim tensor for `value` next to `like`: like's dtype, or float32 when a
// fractional value meets an integer tensor; on like's device.
Tensor wrap_scalar(Scalar value, const Tensor& like);
// The same value as the operand of binary/binary_: always a CPU 0-dim
// tensor, which binary takes beside a tensor on any device (as PyTorch takes
// a CPU scalar tensor beside CUDA ones).  A CUDA kernel then gets the value
// in its arguments: no device allocation, no fill kernel per `x * 2`.
Tensor scalar_operand(Scalar value, const Tensor& like);
// Whether t may stand beside tensors of another device in binary/binary_: a
// CPU 0-dim tensor.
bool is_cpu_scalar(const Tensor& t);

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha = 1);
// self = self op other, in place, computed in self's dtype (other broadcast
// to self's shape).  The result dtype may narrow into self's within its
// category (float64 into float32) but not cross one (float into int64).
// Bumps self's version.
void binary_(BinaryOp op, const Tensor& self, const Tensor& other, Scalar alpha = 1);

// |a - b| <= atol + rtol * |b| elementwise (broadcasting, any dtypes, compared
// in float64); nan is never close, equal infinities are.  A bool tensor.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol);
// Whether every element of a bool tensor is true (true when empty).
bool all_true(const Tensor& t);

// ---- kernels (one slot per device type) -----------------------------------------
// out = a op b; all three already of out's shape; a and b of `compute` dtype.
using BinaryKernel = void (*)(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                              Scalar alpha);
// out (bool) = isclose(a, b); a and b float64 of out's shape.
using IscloseKernel = void (*)(const Tensor& out, const Tensor& a, const Tensor& b, double rtol,
                               double atol);

extern DispatchStub<BinaryKernel> binary_stub;
extern DispatchStub<IscloseKernel> isclose_stub;

}  // namespace native
}  // namespace loom
