// cuda::vector_add: out = a + b on a GPU, for float arrays in host memory.
//
// The smallest real kernel: it proves the nvcc path of the build (cuda_library
// -> objects -> //tensor) and shows the pattern every CUDA kernel in loom
// follows: a plain C++ declaration here, the kernel and its launcher in a .cu
// beside it, every CUDA call checked (LOOM_CUDA_CHECK), and a test comparing
// with loom's CPU result.  Tensor ops on CUDA devices will take device
// pointers from the CUDA allocator instead of copying host arrays.
#pragma once

#include <cstdint>

namespace loom {
namespace cuda {

// out[i] = a[i] + b[i] for 0 <= i < n, computed on CUDA device `device`.
// a, b, out: host arrays of n floats (out may alias a or b).  Copies to the
// device, runs the kernel, copies back and waits.
// Throws loom::Error when n < 0, when the device does not exist, on any CUDA
// error, and when loom was built without CUDA.
void vector_add(const float* a, const float* b, float* out, int64_t n, int device = 0);

}  // namespace cuda
}  // namespace loom
