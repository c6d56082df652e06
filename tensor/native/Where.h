// Raw where(condition, self, other): condition ? self : other elementwise,
// with NumPy broadcasting of all three.
#pragma once

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// condition must be bool; self and other promote as in a binary op (a 0-dim
// operand does not widen the dtype of a same-category dimensioned one).
// Throws naming the shapes that do not broadcast and the devices that differ.
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other);

// ---- kernels (one slot per device type) -----------------------------------------
// out = condition ? a : b; all four of out's shape, a and b of out's dtype.
using WhereKernel = void (*)(const Tensor& out, const Tensor& condition, const Tensor& a,
                             const Tensor& b);

extern DispatchStub<WhereKernel> where_stub;

}  // namespace native
}  // namespace loom
