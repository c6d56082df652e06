// The CUDA kernels of layer_norm_stub and layer_norm_backward_stub: Tensor
// glue around the launchers of LayerNorm.cu.  native::layer_norm has checked
// the arguments and made every tensor contiguous; this lends the backward its
// double scratch (row mean corrections, grad_weight / grad_bias partials)
// from the caching allocator and queues everything on the device's current
// stream.
#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"
#include "tensor/cuda/LayerNorm.h"
#include "tensor/native/LayerNorm.h"

namespace loom {
namespace cuda {
namespace {

const void* cptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

void layer_norm_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t M,
                       int64_t N, double eps, const Tensor& out, const Tensor& mean,
                       const Tensor& rstd) {
  const int device = input.device().index;
  layer_norm_forward(input.dtype(), cptr(input), cptr(weight), cptr(bias), M, N, eps, ptr(out),
                     ptr(mean), ptr(rstd), device, current_stream_handle(device));
}

void layer_norm_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& mean,
                                const Tensor& rstd, const Tensor& weight, int64_t M, int64_t N,
                                const Tensor& grad_input, const Tensor& grad_weight,
                                const Tensor& grad_bias) {
  const int device = input.device().index;
  Tensor scratch;  // per-row mean corrections and partial sums of grad_weight, grad_bias
  if (grad_weight.defined() || grad_bias.defined())
    scratch =
        empty({layer_norm_backward_scratch(M, N)}, TensorOptions(kFloat64).device(input.device()));
  layer_norm_backward(input.dtype(), cptr(grad_out), cptr(input), cptr(mean), cptr(rstd),
                      cptr(weight), M, N, ptr(grad_input), ptr(grad_weight), ptr(grad_bias),
                      static_cast<double*>(ptr(scratch)), device, current_stream_handle(device));
}

}  // namespace

static const native::RegisterKernel reg_layer_norm(native::layer_norm_stub, kCUDA,
                                                   &layer_norm_kernel);
static const native::RegisterKernel reg_layer_norm_backward(native::layer_norm_backward_stub, kCUDA,
                                                            &layer_norm_backward_kernel);

}  // namespace cuda
}  // namespace loom
