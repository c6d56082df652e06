// The shapes of one 2-D pooling, shared by the native ops that compute them
// (Pooling.cpp) and the kernels of every backend.  Plain C++ (no Tensor, no
// CUDA), so nvcc and g++ both read it.
#pragma once

#include <cstdint>

namespace loom {
namespace native {

// Contiguous planes (planes = N * C, height, width) in, (planes, out_h,
// out_w) out.  Adaptive pooling uses only the sizes.  With channels_last
// (max pooling of a 4-D channels-last tensor): (N, height, width, channels)
// in and (N, out_h, out_w, channels) out in memory, planes = N * channels.
struct PoolGeometry {
  int64_t planes = 0, height = 0, width = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  bool channels_last = false;
  int64_t channels = 1;  // with channels_last
};

}  // namespace native
}  // namespace loom
