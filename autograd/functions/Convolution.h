// 2-D convolution, NCHW.
#pragma once

#include "tensor/Tensor.h"

namespace loom {

// input (N, C_in, H, W), weight (C_out, C_in / groups, kH, kW), bias (C_out)
// optional -> (N, C_out, H_out, W_out).  Pairs are {height, width}.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              IntList stride = {1, 1}, IntList padding = {0, 0}, IntList dilation = {1, 1},
              int64_t groups = 1);

}  // namespace loom
