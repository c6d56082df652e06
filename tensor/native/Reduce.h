// Raw reductions.  `dims` empty means all dims.
#pragma once

#include "tensor/Tensor.h"

namespace loom {
namespace native {

// Moves the reduced dims of self to the end and makes it contiguous, so each
// output element reduces one contiguous run of `inner` values.  Returns the
// rearranged tensor; sets outer (number of outputs) and inner.
Tensor reduction_layout(const Tensor& self, const std::vector<bool>& mask, int64_t& outer,
                        int64_t& inner);

// Sum; integer and bool inputs sum to int64, floats keep their dtype
// (accumulated in double).
Tensor sum(const Tensor& self, IntList dims, bool keepdim);

}  // namespace native
}  // namespace loom
