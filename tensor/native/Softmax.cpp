// Raw softmax/log_softmax: checks and layout; loops in tensor/cpu/Softmax.cpp,
// CUDA kernels in tensor/cuda/Softmax.cu.
#include "tensor/native/Softmax.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace native {

DispatchStub<SoftmaxKernel> softmax_stub("softmax");
DispatchStub<SoftmaxBackwardKernel> softmax_backward_stub("softmax_backward");

namespace {

struct Layout {
  int64_t outer = 1, D = 1, inner = 1;
};

Layout layout_of(const IntList& sizes, int64_t dim) {
  Layout l;
  const int64_t rank = static_cast<int64_t>(sizes.size());
  for (int64_t d = 0; d < rank; ++d) {
    if (d < dim) l.outer *= sizes[d];
    else if (d == dim) l.D = sizes[d];
    else l.inner *= sizes[d];
  }
  return l;
}

void check_input(const char* op, const Tensor& self) {
  check_defined(op, self, "self");
  LOOM_CHECK(self.is_floating_point(), op,
             ": expected a floating-point tensor (float32 or float64), got ", self.describe(),
             "; convert it with .to(kFloat32) first");
  check_kernel_device(op, self);
}

Tensor forward(const char* op, const Tensor& self, int64_t dim, bool log) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (self.defined() && is_reduced_float(self.dtype()))
    return round_to(forward(op, widen(self), dim, log), self.dtype());
  check_input(op, self);
  const int64_t d = wrap_dim(dim, self.dim(), op);
  const Layout l = layout_of(self.sizes(), self.dim() == 0 ? 1 : d);
  const Tensor x = contiguous(self);
  Tensor out = empty(self.sizes(), TensorOptions(self.dtype()).device(self.device()));
  softmax_stub(x.device(), out, x, l.outer, l.D, l.inner, log);
  return out;
}

Tensor backward(const char* op, const Tensor& grad, const Tensor& output, int64_t dim, bool log) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (output.defined() && is_reduced_float(output.dtype()))
    return round_to(backward(op, widen(grad), widen(output), dim, log), output.dtype());
  check_input(op, output);
  check_defined(op, grad, "grad");
  LOOM_CHECK(grad.sizes() == output.sizes() && grad.dtype() == output.dtype(), op,
             ": grad ", grad.describe(), " does not match the output ", output.describe());
  check_same_device(op, grad, "grad", output, "output");
  const int64_t d = wrap_dim(dim, output.dim(), op);
  const Layout l = layout_of(output.sizes(), output.dim() == 0 ? 1 : d);
  Tensor grad_input = empty(output.sizes(), TensorOptions(output.dtype()).device(output.device()));
  softmax_backward_stub(output.device(), grad_input, contiguous(grad), contiguous(output), l.outer,
                        l.D, l.inner, log);
  return grad_input;
}

}  // namespace

Tensor softmax(const Tensor& self, int64_t dim) { return forward("softmax", self, dim, false); }
Tensor log_softmax(const Tensor& self, int64_t dim) {
  return forward("log_softmax", self, dim, true);
}
Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim) {
  return backward("softmax_backward", grad, output, dim, false);
}
Tensor log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim) {
  return backward("log_softmax_backward", grad, output, dim, true);
}

}  // namespace native
}  // namespace loom
