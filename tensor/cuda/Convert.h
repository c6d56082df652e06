// out <- in converted to out's dtype, both on one CUDA device and of one
// shape, any layouts: the Tensor-level form of the conversion kernel
// (Convert.cu, launched from Elementwise.cpp) for the CUDA host code that
// copies (Copy.cpp).  Queued on the device's current stream.
#pragma once

#include "tensor/Tensor.h"

namespace loom {
namespace cuda {

void convert_kernel(const Tensor& out, const Tensor& in);

}  // namespace cuda
}  // namespace loom
