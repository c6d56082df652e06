// CUDA pooling launchers on raw pointers, for tensor/cuda/Pooling.cpp.
// Plain C++ declarations; kernels in Pooling.cu.
//
// Same contract as the CPU kernels (tensor/cpu/Pooling.h): contiguous
// (planes, H, W) in, (planes, OH, OW) out; max-pool indices (int64) flat
// h * W + w within each plane.  Backward kernels overwrite grad_input (every
// element written, no zero-fill needed).  Queued on `stream` of `device`;
// return without waiting.
//
// Max pooling takes float32, float64, float16 and bfloat16 as they are
// (compared, and in the backward summed, in float32 for 16-bit, float64 for
// float64; each output is its window's winning input value exactly), and
// with g.channels_last the (N, H, W, C) layout for values, indices and
// gradients alike.  Its backward gathers: g must carry the forward's window
// (kernel, stride, padding, dilation), and the indices must be the forward's
// for it (an index outside its window is not visited).  Average and adaptive
// pooling take contiguous float32 or float64 planes.
#pragma once

#include <cstdint>

#include "tensor/DType.h"
#include "tensor/native/PoolGeometry.h"

namespace loom {
namespace cuda {

void max_pool2d_forward(DType dtype, const native::PoolGeometry& g, const void* input, void* out,
                        int64_t* indices, int device, uint64_t stream);
void max_pool2d_backward(DType dtype, const native::PoolGeometry& g, const void* grad_out,
                         const int64_t* indices, void* grad_input, int device, uint64_t stream);

void avg_pool2d_forward(DType dtype, const native::PoolGeometry& g, bool count_include_pad,
                        const void* input, void* out, int device, uint64_t stream);
void avg_pool2d_backward(DType dtype, const native::PoolGeometry& g, bool count_include_pad,
                         const void* grad_out, void* grad_input, int device, uint64_t stream);

void adaptive_avg_pool2d_forward(DType dtype, const native::PoolGeometry& g, const void* input,
                                 void* out, int device, uint64_t stream);
void adaptive_avg_pool2d_backward(DType dtype, const native::PoolGeometry& g, const void* grad_out,
                                  void* grad_input, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
