// Element-wise reduction kernels gloo calls while it reduces (allreduce,
// reduce), one per (dtype, ReduceOp).
//
// gloo's signature is fn(out, a, b, n): out[i] = a[i] (op) b[i] for n
// elements; out may alias a or b, so the loops read before they write and
// carry no restrict qualifiers (the compiler still vectorises them behind a
// runtime overlap check).
//
// Semantics per dtype:
//   float32/float64/int32/int64/uint8: sum, product, min, max as in C++
//     (integers wrap on overflow, as torch's do).
//   bool: sum and max are logical or, product and min logical and (torch's
//     rule for bool tensors).
//   avg has no kernel: the process group reduces with sum and then divides
//     (divide_in_place); it is defined for floating dtypes only.
#pragma once

#include <cstddef>
#include <functional>

#include "distributed/ReduceOp.h"
#include "tensor/DType.h"

namespace loom {
namespace distributed {
namespace gloo_glue {

using ReduceFn = std::function<void(void*, const void*, const void*, size_t)>;

// The kernel for `op` on `dtype`; ReduceOp::Avg gives the sum kernel.
// Throws loom::Error for avg on a non-floating dtype.
ReduceFn reduce_function(DType dtype, ReduceOp op);

// data[i] /= divisor for n elements of a floating dtype (the second half of avg).
void divide_in_place(void* data, DType dtype, size_t n, double divisor);

}  // namespace gloo_glue
}  // namespace distributed
}  // namespace loom
