// 2-D pooling, NCHW (or CHW).  Pairs are {height, width}; an empty stride
// means stride = kernel_size, as in PyTorch.
#pragma once

#include <tuple>

#include "tensor/Tensor.h"

namespace loom {

Tensor max_pool2d(const Tensor& input, IntList kernel_size, IntList stride = {},
                  IntList padding = {0, 0}, IntList dilation = {1, 1}, bool ceil_mode = false);
// (output, indices): indices are flat positions within each input plane (int64).
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntList kernel_size,
                                                   IntList stride = {}, IntList padding = {0, 0},
                                                   IntList dilation = {1, 1},
                                                   bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, IntList kernel_size, IntList stride = {},
                  IntList padding = {0, 0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& input, IntList output_size);

}  // namespace loom
