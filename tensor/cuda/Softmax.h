// CUDA softmax / log_softmax launchers on raw pointers, for
// tensor/cuda/Softmax.cpp (kernels in Softmax.cu).
//
// Every buffer is a contiguous (outer, D, inner) block of `dtype` (float32 or
// float64), softmax taken along D.  Each call queues kernels on stream
// `stream` (a cudaStream_t as an integer) of CUDA device `device` and returns
// without waiting.  Throws loom::Error on a CUDA error.
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cuda {

// out = softmax(x) or log_softmax(x) along D.
void softmax_forward(DType dtype, const void* x, void* out, int64_t outer, int64_t D,
                     int64_t inner, bool log, int device, uint64_t stream);
// grad_input from grad and the forward's output (see native/Softmax.h).
void softmax_backward(DType dtype, const void* grad, const void* output, void* grad_input,
                      int64_t outer, int64_t D, int64_t inner, bool log, int device,
                      uint64_t stream);

}  // namespace cuda
}  // namespace loom
