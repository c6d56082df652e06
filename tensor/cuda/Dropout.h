// CUDA dropout launcher on raw pointers, for tensor/cuda/Dropout.cpp (kernel
// in Dropout.cu).
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cuda {

// x, out, mask: n contiguous values of `dtype` (float32/float64).  Element i
// is kept when word i % 4 of philox::draw(seed, offset, i / 4) (Philox.h) is
// >= p * 2^32; mask[i] = 1 / (1 - p) when kept, else 0 (all 0 for p = 1),
// and out[i] = x[i] * mask[i].  A pure function of (seed, offset, i): the
// same generator state gives the same mask on any GPU and launch shape.
void dropout(DType dtype, const void* x, void* out, void* mask, int64_t n, double p,
             uint64_t seed, uint64_t offset, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
