// Raw softmax and log_softmax along one dim, and their backward formulas.
//
// The input is viewed as a contiguous (outer, dim, inner) block.  Both are
// numerically stable: the max along dim is subtracted before exp.  Floating
// tensors only; the output is contiguous, on the input's device.
#pragma once

#include "tensor/Tensor.h"

namespace loom {
namespace native {

Tensor softmax(const Tensor& self, int64_t dim);
Tensor log_softmax(const Tensor& self, int64_t dim);
// grad_input = output * (grad - sum(grad * output, dim)).
Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim);
// grad_input = grad - exp(output) * sum(grad, dim).
Tensor log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim);

}  // namespace native

namespace cpu {
// x, out: contiguous (outer, D, inner).
void softmax_kernel(const Tensor& out, const Tensor& x, int64_t outer, int64_t D, int64_t inner,
                    bool log);
// grad, output, grad_input: contiguous (outer, D, inner).
void softmax_backward_kernel(const Tensor& grad_input, const Tensor& grad, const Tensor& output,
                             int64_t outer, int64_t D, int64_t inner, bool log);
}  // namespace cpu

namespace cuda {
// The same kernels on a CUDA device (tensor/native/CudaNn.cpp, kernels in
// tensor/cuda/Softmax.cu), queued on its current stream.
void softmax_kernel(const Tensor& out, const Tensor& x, int64_t outer, int64_t D, int64_t inner,
                    bool log);
void softmax_backward_kernel(const Tensor& grad_input, const Tensor& grad, const Tensor& output,
                             int64_t outer, int64_t D, int64_t inner, bool log);
}  // namespace cuda
}  // namespace loom
