// Raw (non-differentiable) 2-D pooling over (N, C, H, W) or (C, H, W)
// inputs: argument checks and output shapes as in PyTorch, kernels in
// tensor/cpu/Pooling.  Pairs are {h, w} or one value for both; an empty
// stride means stride = kernel_size.
#pragma once

#include <tuple>

#include "tensor/Tensor.h"

namespace loom {
namespace cpu {
struct PoolGeometry;
}  // namespace cpu

namespace native {

// (output, indices); indices (int64) are flat h * W + w within each plane.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntList kernel_size,
                                                   IntList stride, IntList padding,
                                                   IntList dilation, bool ceil_mode);
// The backward functions take the forward input's shape and return
// grad_input (that shape, grad_output's dtype and device).
Tensor max_pool2d_backward(const Tensor& grad_output, const IntList& input_sizes,
                           const Tensor& indices);

Tensor avg_pool2d(const Tensor& input, IntList kernel_size, IntList stride, IntList padding,
                  bool ceil_mode, bool count_include_pad);
Tensor avg_pool2d_backward(const Tensor& grad_output, const IntList& input_sizes,
                           IntList kernel_size,
                           IntList stride, IntList padding, bool ceil_mode,
                           bool count_include_pad);

// Output windows [floor(i * in / out), ceil((i + 1) * in / out)).
Tensor adaptive_avg_pool2d(const Tensor& input, IntList output_size);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_output, const IntList& input_sizes);

}  // namespace native

namespace cuda {
// The CUDA backend of the pooling ops (tensor/native/CudaPooling.cpp,
// kernels in tensor/cuda/Pooling.cu), for contiguous tensors on one CUDA
// device shaped by g (input/grad_input (planes, H, W), out/grad_output/
// indices (planes, OH, OW)), with the CPU kernels' semantics.  Backward
// kernels overwrite grad_input.
void max_pool2d_kernel(const cpu::PoolGeometry& g, const Tensor& input, const Tensor& out,
                       const Tensor& indices);
void max_pool2d_backward_kernel(const cpu::PoolGeometry& g, const Tensor& grad_output,
                                const Tensor& indices, const Tensor& grad_input);
void avg_pool2d_kernel(const cpu::PoolGeometry& g, bool count_include_pad, const Tensor& input,
                       const Tensor& out);
void avg_pool2d_backward_kernel(const cpu::PoolGeometry& g, bool count_include_pad,
                                const Tensor& grad_output, const Tensor& grad_input);
void adaptive_avg_pool2d_kernel(const cpu::PoolGeometry& g, const Tensor& input,
                                const Tensor& out);
void adaptive_avg_pool2d_backward_kernel(const cpu::PoolGeometry& g, const Tensor& grad_output,
                                         const Tensor& grad_input);
}  // namespace cuda
}  // namespace loom
