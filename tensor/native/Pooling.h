// Raw (non-differentiable) 2-D pooling over (N, C, H, W) or (C, H, W)
// inputs: argument checks and output shapes as in PyTorch, kernels in the
// backends (tensor/cpu/Pooling.cpp, tensor/cuda/Pooling.cpp).  Pairs are
// {h, w} or one value for both; an empty stride means stride = kernel_size.
#pragma once

#include <tuple>

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"
#include "tensor/native/PoolGeometry.h"

namespace loom {
namespace native {

// (output, indices); indices (int64) are flat h * W + w within each plane.
// A 4-D channels-last input gives channels-last output and indices where the
// device's kernels take that layout (max_pool2d_channels_last_stub).
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntList kernel_size,
                                                   IntList stride, IntList padding,
                                                   IntList dilation, bool ceil_mode);
// The backward functions take the forward input's shape and return
// grad_input (that shape, grad_output's dtype and device).  max_pool2d's
// takes the forward's window arguments and the indices it returned for them
// (grad_output and indices shaped like its output; throws otherwise): the
// CUDA kernel gathers each input element's gradient from the windows that
// can contain it, as PyTorch's max_pool2d_with_indices_backward does.
Tensor max_pool2d_backward(const Tensor& grad_output, const IntList& input_sizes,
                           IntList kernel_size, IntList stride, IntList padding,
                           IntList dilation, bool ceil_mode, const Tensor& indices);

Tensor avg_pool2d(const Tensor& input, IntList kernel_size, IntList stride, IntList padding,
                  bool ceil_mode, bool count_include_pad);
Tensor avg_pool2d_backward(const Tensor& grad_output, const IntList& input_sizes,
                           IntList kernel_size,
                           IntList stride, IntList padding, bool ceil_mode,
                           bool count_include_pad);

// Output windows [floor(i * in / out), ceil((i + 1) * in / out)).
Tensor adaptive_avg_pool2d(const Tensor& input, IntList output_size);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_output, const IntList& input_sizes);

// ---- kernels (one slot per device type) -----------------------------------------
// Contiguous tensors shaped by g: input/grad_input (planes, H, W), out/
// grad_output/indices (planes, OH, OW).  Max-pool indices (int64) are flat
// h * W + w within each plane (nan wins, as in PyTorch).  Backward kernels
// overwrite grad_input; the max-pool backward's g holds the forward's whole
// geometry (window included) and its indices are the forward's.
using MaxPool2dKernel = void (*)(const PoolGeometry& g, const Tensor& input, const Tensor& out,
                                 const Tensor& indices);
using MaxPool2dBackwardKernel = void (*)(const PoolGeometry& g, const Tensor& grad_output,
                                         const Tensor& indices, const Tensor& grad_input);
// PyTorch's divisor: the window clipped to the padded input, or to the input
// itself without count_include_pad.
using AvgPool2dKernel = void (*)(const PoolGeometry& g, bool count_include_pad,
                                 const Tensor& input, const Tensor& out);
using AvgPool2dBackwardKernel = void (*)(const PoolGeometry& g, bool count_include_pad,
                                         const Tensor& grad_output, const Tensor& grad_input);
// Windows [floor(i * in / out), ceil((i + 1) * in / out)).
using AdaptiveAvgPool2dKernel = void (*)(const PoolGeometry& g, const Tensor& input,
                                         const Tensor& out);
using AdaptiveAvgPool2dBackwardKernel = void (*)(const PoolGeometry& g,
                                                 const Tensor& grad_output,
                                                 const Tensor& grad_input);

// Whether the device's max_pool2d kernels (forward and backward) take a
// 16-bit float dtype as it is; else the ops compute in float32 and round.
using MaxPool2dTakesKernel = bool (*)(DType dtype);
// Whether the device's max_pool2d kernels take a 4-D channels-last input of
// dtype as it is (PoolGeometry::channels_last), giving channels-last values,
// indices and input gradients; else the ops pool an NCHW copy.
using MaxPool2dChannelsLastKernel = bool (*)(DType dtype);

extern DispatchStub<MaxPool2dKernel> max_pool2d_stub;
extern DispatchStub<MaxPool2dTakesKernel> max_pool2d_takes_stub;
extern DispatchStub<MaxPool2dChannelsLastKernel> max_pool2d_channels_last_stub;
extern DispatchStub<MaxPool2dBackwardKernel> max_pool2d_backward_stub;
extern DispatchStub<AvgPool2dKernel> avg_pool2d_stub;
extern DispatchStub<AvgPool2dBackwardKernel> avg_pool2d_backward_stub;
extern DispatchStub<AdaptiveAvgPool2dKernel> adaptive_avg_pool2d_stub;
extern DispatchStub<AdaptiveAvgPool2dBackwardKernel> adaptive_avg_pool2d_backward_stub;

}  // namespace native
}  // namespace loom
