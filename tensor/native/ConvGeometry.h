// The shapes of one 2-D convolution, shared by the native op that computes
// them (Convolution.cpp) and the kernels of every backend.  Plain C++ (no
// Tensor, no CUDA), so nvcc and g++ both read it.
#pragma once

#include <cstdint>

namespace loom {
namespace native {

// Input (batch, in_channels, height, width), weight (out_channels,
// in_channels / groups, kernel_h, kernel_w), output (batch, out_channels,
// out_h, out_w).  The input, the output and their gradients are dense NCHW
// buffers, or NHWC (channels last) with channels_last; the weight is OIHW.
struct ConvGeometry {
  int64_t batch = 0, in_channels = 0, height = 0, width = 0;
  int64_t out_channels = 0, kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  int64_t out_h = 0, out_w = 0;
  bool channels_last = false;
};

}  // namespace native
}  // namespace loom
