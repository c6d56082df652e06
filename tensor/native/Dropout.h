// Raw dropout: a random keep-mask drawn from a Generator, applied in one pass.
//
// The generator advances by one draw per call; element i's keep decision is a
// hash of (that draw, i), so the mask is the same for a seed whatever the
// thread count, and is drawn in parallel.
#pragma once

#include <tuple>

#include "tensor/Generator.h"
#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// (output, mask): mask has input's shape and dtype and holds 1 / (1 - p) where
// the element is kept and 0 where it is dropped (all zeros for p = 1);
// output = input * mask.  Throws unless input is floating and p in [0, 1].
std::tuple<Tensor, Tensor> dropout(const Tensor& input, double p, Generator* gen);

// ---- kernels (one slot per device type) -----------------------------------------
// out, mask, x contiguous of one shape and floating dtype.
using DropoutKernel = void (*)(const Tensor& out, const Tensor& mask, const Tensor& x, double p,
                               uint64_t seed);

extern DispatchStub<DropoutKernel> dropout_stub;

}  // namespace native
}  // namespace loom
