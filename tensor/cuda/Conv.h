// cuDNN convolution launchers on raw pointers, for tensor/cuda/Conv.cpp.
// Plain C++ declarations; the implementation is in Conv.cu.
//
// Buffers are contiguous NCHW: input (N, C, H, W), weight (O, C / groups,
// kh, kw), output (N, O, OH, OW), bias (O), of float32, float64, float16 or
// bfloat16 (float32 accumulation for the 16-bit ones); with g.channels_last
// the input, output and their gradients are NHWC and the weight and its
// gradient OHWI (each channels-last contiguous), and there is no bias (the
// caller adds it and sums its gradient).  The geometry is
// native::ConvGeometry's (every size >= 1, each fitting in int).  Each call
// queues its work on `stream` of `device` with this thread's cuDNN
// handle and returns without waiting (except a first benchmarked shape: see
// Conv.cu).  Throws loom::Error on a cuDNN/CUDA error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tensor/DType.h"
#include "tensor/native/ConvGeometry.h"

namespace loom {
namespace cuda {

// Returns a device buffer of at least `bytes` bytes on the device, valid
// until the launcher returns or asks again (the caller allocates it from the
// caching allocator on the same stream, so freeing it afterwards, or on a
// larger request, is stream-ordered); throws loom::Error when the device
// is out of memory.
using WorkspaceFn = std::function<void*(size_t bytes)>;

// Per-call switches (cuda::cudnn_allow_tf32 / cudnn_benchmark at the call).
struct ConvOptions {
  bool allow_tf32 = true;
  bool benchmark = false;
  int device = 0;
  uint64_t stream = 0;
};

// out = conv(input, weight) (+ bias when non-null).
void conv2d_forward(DType dtype, const native::ConvGeometry& g, const void* input,
                    const void* weight, const void* bias, void* out, const ConvOptions& o,
                    const WorkspaceFn& workspace);

// The gradients for grad_out (N, O, OH, OW); a null output is not computed.
void conv2d_backward(DType dtype, const native::ConvGeometry& g, const void* input,
                     const void* weight, const void* grad_out, void* grad_input,
                     void* grad_weight, void* grad_bias, const ConvOptions& o,
                     const WorkspaceFn& workspace);

}  // namespace cuda
}  // namespace loom
