// Raw (non-differentiable) 2-D convolution: argument checks, output shape,
// operands in the layout the kernels want (NCHW, or channels last where they
// ask for it), then the backend kernel (tensor/cpu/Convolution).
#pragma once

#include "tensor/Tensor.h"
#include "tensor/native/ConvGeometry.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// input (N, C, H, W) or unbatched (C, H, W); weight (O, C / groups, kh, kw);
// bias (O) or undefined.  stride/padding/dilation are {h, w} or one value for
// both.  Throws naming the shapes on channel, group, kernel-size and rank errors.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntList stride,
              IntList padding, IntList dilation, int64_t groups);

// conv2d runs channels last where the input or the weight is channels last
// (as in PyTorch) and the device's kernels run it so (conv2d_channels_last
// below); its output is then channels last.  This says whether they would
// for an input of `input_sizes` in `dtype` on `device` (every pass of a
// training step): what a model asks before converting its input once, as
// nn::Conv2d's runs_channels_last and loom's ResNets do.
bool conv2d_prefers_channels_last(Device device, DType dtype, const IntList& input_sizes,
                                  const IntList& weight_sizes, const IntList& stride,
                                  const IntList& padding, const IntList& dilation,
                                  int64_t groups);

// Gradients of conv2d for grad_output (shaped like conv2d's output); each is
// computed only when its flag is set (else left undefined).
void conv2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                     IntList stride, IntList padding, IntList dilation, int64_t groups,
                     bool need_input, bool need_weight, bool need_bias, Tensor& grad_input,
                     Tensor& grad_weight, Tensor& grad_bias);

// ---- kernels (one slot per device type) -----------------------------------------
// Tensors shaped by g, dense in its layout (NCHW, or channels last with
// g.channels_last; weight and bias contiguous): out = conv(input, weight)
// (+ bias when defined).
using Conv2dForwardKernel = void (*)(const ConvGeometry& g, const Tensor& input,
                                     const Tensor& weight, const Tensor& bias, const Tensor& out);
// The gradients for grad_output; an undefined output is not wanted.
using Conv2dBackwardKernel = void (*)(const ConvGeometry& g, const Tensor& input,
                                      const Tensor& weight, const Tensor& grad_output,
                                      const Tensor& grad_input, const Tensor& grad_weight,
                                      const Tensor& grad_bias);

// Passes of a convolution, as a bit mask.
enum Conv2dPasses : int {
  kConv2dForward = 1,
  kConv2dBackwardData = 2,    // the input gradient
  kConv2dBackwardWeights = 4  // the weight and bias gradients
};
// Whether the kernels take a 16-bit float dtype for every pass in `passes`
// of g as it is (on the CPU: bfloat16 where oneDNN has kernels for it).  A
// device without this slot, or a false answer, makes the native op compute in
// float32 and round once.
using Conv2dTakesKernel = bool (*)(const ConvGeometry& g, DType dtype, int passes);

// Whether the kernels would run the passes in `passes` of g (in dtype) on
// channels-last activations rather than NCHW ones (on the CPU: where oneDNN
// runs them, whose kernels read NHWC as it is but NCHW only through
// reorders into their blocked layouts).  Given a channels-last input (or
// weight), conv2d then hands them channels-last operands and returns a
// channels-last output, which batch norm and the elementwise ops keep.
using Conv2dChannelsLastKernel = bool (*)(const ConvGeometry& g, DType dtype, int passes);

extern DispatchStub<Conv2dForwardKernel> conv2d_forward_stub;
extern DispatchStub<Conv2dChannelsLastKernel> conv2d_channels_last_stub;
extern DispatchStub<Conv2dBackwardKernel> conv2d_backward_stub;
extern DispatchStub<Conv2dTakesKernel> conv2d_takes_stub;

}  // namespace native
}  // namespace loom
