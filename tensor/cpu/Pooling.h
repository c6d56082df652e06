// CPU pooling kernels over contiguous planes: (planes = N * C, H, W) in,
// (planes, OH, OW) out.  Every kernel runs planes in parallel.
#pragma once

#include <cstdint>

#include "tensor/native/PoolGeometry.h"

namespace loom {
namespace cpu {

using native::PoolGeometry;  // tensor/native/PoolGeometry.h

// indices: the argmax of each window as a flat h * W + w within its plane
// (NaN wins, as in PyTorch).
template <typename T>
void max_pool2d_forward(const PoolGeometry& g, const T* input, T* out, int64_t* indices);
// grad_input (overwritten) = scatter-add of grad_out at indices.
template <typename T>
void max_pool2d_backward(const PoolGeometry& g, const T* grad_out, const int64_t* indices,
                         T* grad_input);

// The same over channels-last tensors (g.channels_last; the indices as
// above, within each plane; PoolingChannelsLast.cpp): T = float, double, or
// BFloat16 (compared and, in the backward, accumulated in float32).
template <typename T>
void max_pool2d_forward_channels_last(const PoolGeometry& g, const T* input, T* out,
                                      int64_t* indices);
template <typename T>
void max_pool2d_backward_channels_last(const PoolGeometry& g, const T* grad_out,
                                       const int64_t* indices, T* grad_input);

// PyTorch's divisor: the window clipped to the padded input, or to the input
// itself without count_include_pad.
template <typename T>
void avg_pool2d_forward(const PoolGeometry& g, bool count_include_pad, const T* input, T* out);
template <typename T>
void avg_pool2d_backward(const PoolGeometry& g, bool count_include_pad, const T* grad_out,
                         T* grad_input);

// Windows [floor(i * in / out), ceil((i + 1) * in / out)); kernel/stride unused.
template <typename T>
void adaptive_avg_pool2d_forward(const PoolGeometry& g, const T* input, T* out);
template <typename T>
void adaptive_avg_pool2d_backward(const PoolGeometry& g, const T* grad_out, T* grad_input);

}  // namespace cpu
}  // namespace loom
