// The CUDA launcher of native::amp_unscale_ (kernel in AmpUnscale.cu), on
// raw pointers: `count` contiguous gradients of one dtype on `device`, each
// of numels[k] elements, checked for inf/NaN (found_inf, one float on the
// device, set to 1 when one is) and multiplied by *inv_scale (one float on
// the device) in place.  Up to 48 gradients and 320 blocks of 64K elements
// a launch (the lists in the kernel's arguments); queued on `stream`, returns without waiting.
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cuda {

void amp_unscale(DType dtype, int count, void* const* grads, const int64_t* numels,
                 float* found_inf, const float* inv_scale, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
