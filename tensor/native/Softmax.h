// Raw softmax and log_softmax along one dim, and their backward formulas.
//
// The input is viewed as a contiguous (outer, dim, inner) block.  Both are
// numerically stable: the max along dim is subtracted before exp.  Floating
// tensors only; the output is contiguous, on the input's device.
#pragma once

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

Tensor softmax(const Tensor& self, int64_t dim);
Tensor log_softmax(const Tensor& self, int64_t dim);
// grad_input = output * (grad - sum(grad * output, dim)).
Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim);
// grad_input = grad - exp(output) * sum(grad, dim).
Tensor log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim);

// ---- kernels (one slot per device type) -----------------------------------------
// x, out: contiguous (outer, D, inner).
using SoftmaxKernel = void (*)(const Tensor& out, const Tensor& x, int64_t outer, int64_t D,
                               int64_t inner, bool log);
// grad, output, grad_input: contiguous (outer, D, inner).
using SoftmaxBackwardKernel = void (*)(const Tensor& grad_input, const Tensor& grad,
                                       const Tensor& output, int64_t outer, int64_t D,
                                       int64_t inner, bool log);

extern DispatchStub<SoftmaxKernel> softmax_stub;
extern DispatchStub<SoftmaxBackwardKernel> softmax_backward_stub;

}  // namespace native
}  // namespace loom
