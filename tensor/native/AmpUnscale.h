// The gradient unscaling of amp::GradScaler in one pass: PyTorch's
// _amp_foreach_non_finite_check_and_unscale_.  Every element of every
// gradient is checked for inf/NaN (found_inf becomes 1 when one is; it is
// never reset here) and multiplied by inv_scale, in place, in the gradient's
// dtype with float32 arithmetic (float64 for float64 gradients), as PyTorch
// does: g = g * inv_scale, except that inv_scale == 1 leaves g as it is.
// The check reads the value before it is multiplied.  On CUDA one launch
// covers up to 48 gradients of one dtype in 64K-element chunks
// (cuda/TensorChunks.cuh), and nothing waits for the device (found_inf and
// inv_scale stay there); the CPU runs one loop per gradient.
#pragma once

#include <vector>

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// grads: floating tensors (float32, float64, float16, bfloat16) on one
// device; found_inf and inv_scale: float32 tensors of one element on that
// device.  Throws loom::Error, before touching anything, for anything else.
// A gradient that is neither contiguous nor channels last is unscaled
// through a contiguous copy.  Bumps each gradient's version.
void amp_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                  const Tensor& inv_scale);

// ---- kernels (one slot per device type) -----------------------------------------
// Checked dense gradients of one device (any of the four dtypes, mixed),
// each numel() elements from data_ptr() in some order.
using AmpUnscaleKernel = void (*)(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                  const Tensor& inv_scale);
extern DispatchStub<AmpUnscaleKernel> amp_unscale_stub;

}  // namespace native
}  // namespace loom
