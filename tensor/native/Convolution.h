// Raw (non-differentiable) 2-D convolution: argument checks, output shape,
// contiguous NCHW operands, then the backend kernel (tensor/cpu/Convolution).
#pragma once

#include "tensor/Tensor.h"

namespace loom {
namespace cpu {
struct ConvGeometry;
}  // namespace cpu

namespace native {

// input (N, C, H, W) or unbatched (C, H, W); weight (O, C / groups, kh, kw);
// bias (O) or undefined.  stride/padding/dilation are {h, w} or one value for
// both.  Throws naming the shapes on channel, group, kernel-size and rank errors.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntList stride,
              IntList padding, IntList dilation, int64_t groups);

// Gradients of conv2d for grad_output (shaped like conv2d's output); each is
// computed only when its flag is set (else left undefined).
void conv2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                     IntList stride, IntList padding, IntList dilation, int64_t groups,
                     bool need_input, bool need_weight, bool need_bias, Tensor& grad_input,
                     Tensor& grad_weight, Tensor& grad_bias);

}  // namespace native

namespace cuda {
// The CUDA backend of conv2d (tensor/native/CudaConvolution.cpp, cuDNN via
// tensor/cuda/Conv.cu), for contiguous NCHW tensors of one floating dtype on
// one CUDA device shaped by g: input (N, C, H, W), weight (O, C/groups, kh,
// kw), bias (O) or undefined, out / grad_output (N, O, OH, OW).  Empty
// shapes are handled here (cuDNN rejects zero sizes).  The backward writes
// each defined gradient (overwriting it) and skips undefined ones.  TF32 and
// algorithm search per cuda::cudnn_allow_tf32() / cudnn_benchmark().
void conv2d_forward_kernel(const cpu::ConvGeometry& g, const Tensor& input, const Tensor& weight,
                           const Tensor& bias, const Tensor& out);
void conv2d_backward_kernel(const cpu::ConvGeometry& g, const Tensor& input,
                            const Tensor& weight, const Tensor& grad_output,
                            const Tensor& grad_input, const Tensor& grad_weight,
                            const Tensor& grad_bias);
}  // namespace cuda
}  // namespace loom
