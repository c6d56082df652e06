// The shape batch norm sees, shared by the native op (Normalization.cpp) and
// the kernels of every backend.  Plain C++ (no Tensor, no CUDA), so nvcc and
// g++ both read it.
#pragma once

#include <cstdint>

namespace loom {
namespace native {

// A contiguous (batch, channels, spatial) input, spatial the product of the
// dims after the channel dim (1 for (N, C)).  With channels_last, a 4-D
// channels-last input instead: (batch, spatial, channels) in memory, as are
// the output and the gradients.
struct BatchNormShape {
  int64_t batch = 0, channels = 0, spatial = 1;
  bool channels_last = false;
  bool relu = false;  // the output is max(batch_norm(x), 0): batch norm and a ReLU fused
  // A residual (laid out as x) is added to batch_norm(x), before the ReLU:
  // ResNet's relu(bn(conv(x)) + identity) in one pass.
  bool residual = false;
};

}  // namespace native
}  // namespace loom
