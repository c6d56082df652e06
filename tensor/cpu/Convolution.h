// CPU convolution kernels (NCHW, contiguous buffers).  Two strategies:
//
// * Stride-1 float32 convolutions whose padded width wastes little (the
//   3x3/5x5 "same" convs of ConvNets and early ResNet stages) skip im2col:
//   the GEMM reads the zero-padded image through shifted rows
//   (ConvolutionShifted.cpp), parallel over images.  Not the backward of 1x1
//   unpadded convolutions: their gradients are plain GEMMs (below).
// * Everything else is im2col + GEMM.  The output pixels of the minibatch are
//   cut into chunks whose im2col matrix fits in L2 (a pixel range of one
//   image, or several whole images); each thread owns whole images, so it can
//   im2col, multiply and col2im its chunks without locks.  Narrow outputs
//   (< 16 columns) gather their im2col rows through an index table.  Layers
//   with few or narrow chunks (late stages, large weights) run chunk by chunk
//   with the GEMM itself split over the threads.
#pragma once

#include <cstdint>

#include "tensor/native/ConvGeometry.h"

namespace loom {
namespace cpu {

using native::ConvGeometry;  // tensor/native/ConvGeometry.h

// out (N, O, OH, OW) = conv(input (N, C, H, W), weight (O, C/groups, kh, kw))
// + bias (O) when bias is non-null.
template <typename T>
void conv2d_forward(const ConvGeometry& g, const T* input, const T* weight, const T* bias,
                    T* out);

// Gradients for grad_out (N, O, OH, OW).  Each output pointer may be null
// (not wanted); those given are overwritten.
template <typename T>
void conv2d_backward(const ConvGeometry& g, const T* input, const T* weight, const T* grad_out,
                     T* grad_input, T* grad_weight, T* grad_bias);

// ---- stride-1 float32 convolutions without im2col ----------------------------
// (tensor/cpu/ConvolutionShifted.cpp; conv2d_forward/backward dispatch to
// them when the shifted-row kernels of Gemm.h are available and the padded
// width wastes little.)

bool shifted_forward_ok(const ConvGeometry& g);
void conv2d_forward_shifted(const ConvGeometry& g, const float* input, const float* weight,
                            const float* bias, float* out);
// Whether the backward qualifies; grad_input additionally needs the
// transposed convolution to qualify.
bool shifted_backward_ok(const ConvGeometry& g, bool need_input);
void conv2d_backward_shifted(const ConvGeometry& g, const float* input, const float* weight,
                             const float* grad_out, float* grad_input, float* grad_weight,
                             float* grad_bias);

}  // namespace cpu
}  // namespace loom
