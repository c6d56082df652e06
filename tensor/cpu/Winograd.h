// Winograd F(2x2, 3x3) float32 convolution (Lavin and Gray, 2016, "Fast
// Algorithms for Convolutional Neural Networks"): loom's own kernels for the
// forward pass and the input gradient of 3x3 stride-1 convolutions on NCHW
// buffers, for the small batches where oneDNN's Winograd is slow.
//
// Each 2x2 block of outputs ("tile") is A^T [(G g G^T) . (B^T d B)] A, with
// d the 4x4 input patch under it and g the 3x3 filter: 16 multiplications
// per tile and channel pair instead of 36.  Summed over input channels, the
// 16 elementwise products become 16 independent matrix products
//   M_p (out channels x tiles) = U_p (out x in channels) V_p (in channels x tiles)
// (loom's AVX-512 GEMM kernel, tensor/cpu/Gemm.h).
//
// Why loom has its own: oneDNN 2.6's Winograd kernel is F(4x4, 3x3) and
// transforms the weights on every call (9.4 MB for a 256-channel layer).
// At a pipeline's micro-batch of 4 images of 8x8 (ResNet-50's layer3 at
// 128x128 input) that transform costs more than the products, and the
// kernel runs at 40% of its batch-32 speed per image.  Here the transformed
// weights are kept under WeightReuse (tensor/WeightReuse.h: the pipeline's
// promise that the weights do not change within a step), so the 8 or 16
// micro-batches of a step transform each layer's weights once per pass.
//
// Rounding: the transforms add and subtract values of the input's magnitude
// before the products (errors of ~1e-6 of the outputs' magnitude, as
// oneDNN's and cuDNN's Winograd kernels; the direct kernels' ~1e-7).
// ConvChoice (tensor/cpu/ConvChoice.h) times these kernels as loom's side
// of each pass they apply to, so they run only where they are the fastest.
#pragma once

#include "tensor/cpu/OneDnnConvolution.h"
#include "tensor/native/ConvGeometry.h"

namespace loom {
namespace cpu {

// Whether the kernels below compute g: float32 is the caller's to check;
// here NCHW, a 3x3 kernel, stride 1, no dilation, one group, padding at
// most 2, at least 16 input and output channels (below that the transforms
// cost more than they save), and a CPU with AVX-512 (the GEMM kernel).
// LOOM_ONEDNN_ALGORITHM=direct turns them off with oneDNN's (read once).
bool winograd_applies(const native::ConvGeometry& g);

// y = conv2d(x, w) + bias (bias may be null); every buffer dense NCHW/OIHW.
// `weights`: which weight tensor w is and at which version, to keep its
// transform (none: transformed for this call only).
void winograd_forward(const native::ConvGeometry& g, const float* x, const float* w,
                      const float* bias, float* y, const onednn::WeightVersion& weights);

// grad_x = the input gradient for grad_y (overwritten).
void winograd_backward_data(const native::ConvGeometry& g, const float* w, const float* grad_y,
                            float* grad_x, const onednn::WeightVersion& weights);

}  // namespace cpu
}  // namespace loom
