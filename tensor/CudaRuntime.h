// loom::cuda: what the CUDA runtime can see, in plain C++ (no CUDA types), so
// every file and every build (with or without the toolkit) can ask.
//
// Built with CUDA (the toolkit was found, LOOM_WITH_CUDA), these query the
// driver through the CUDA runtime (tensor/cuda/Runtime.cu).  Built without,
// they are stubs (tensor/CudaRuntime.cpp): no devices.  A binary built with
// CUDA still starts on a machine without a GPU or driver; it just sees none.
#pragma once

namespace loom {
namespace cuda {

// True when loom was compiled with CUDA support (independent of any GPU).
bool built_with_cuda();
// Number of CUDA devices visible to this process (honours
// CUDA_VISIBLE_DEVICES); 0 without a driver, without a GPU, or when loom was
// built without CUDA.  Never throws.
int device_count();
// True when at least one CUDA device can be used.
bool is_available();

}  // namespace cuda
}  // namespace loom
