// The CUDA kernels of the losses (native/Loss.h): raw pointers for the
// launchers of Loss.h on the device's current stream.  Totals and the mean's
// divisor stay on the device, in scratch tensors from the caching allocator,
// so nothing waits for the GPU.
#include "tensor/cuda/HostUtil.h"
#include "tensor/cuda/Loss.h"
#include "tensor/native/Loss.h"

namespace loom {
namespace cuda {
namespace {

void class_loss_kernel(bool cross_entropy, const Tensor& loss, const Tensor& logsumexp,
                       const Tensor& out, const Tensor& total_weight, const Tensor& x,
                       const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                       int64_t S, int64_t ignore_index, double label_smoothing, bool mean) {
  const Tensor scratch = scratch_doubles(x, class_loss_scratch(N * S));
  class_loss_forward(x.dtype(), cross_entropy, x.data_ptr(), cptr<int64_t>(target),
                     cptr(weight), N, C, S, ignore_index, label_smoothing, loss.data_ptr(),
                     logsumexp.defined() ? static_cast<double*>(logsumexp.data_ptr()) : nullptr,
                     out.defined() ? out.data_ptr() : nullptr,
                     static_cast<double*>(total_weight.data_ptr()), mean,
                     static_cast<double*>(scratch.data_ptr()), device_of(x), stream_of(x));
}

void class_loss_backward_kernel(bool cross_entropy, const Tensor& grad_input, const Tensor& grad,
                                const Tensor& divisor, const Tensor& x, const Tensor& logsumexp,
                                const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                                int64_t S, int64_t ignore_index, double label_smoothing) {
  const Tensor scratch = scratch_doubles(x, 1);  // the sum of the class weights
  class_loss_backward(x.dtype(), cross_entropy, grad_input.data_ptr(), grad.data_ptr(),
                      grad.numel() == 1, cptr<double>(divisor), x.data_ptr(),
                      cptr<double>(logsumexp), cptr<int64_t>(target), cptr(weight), N, C, S,
                      ignore_index, label_smoothing,
                      static_cast<double*>(scratch.data_ptr()), device_of(x), stream_of(x));
}

void squared_error_kernel(const Tensor& out, const Tensor& x, const Tensor& y) {
  squared_error(x.dtype(), x.data_ptr(), y.data_ptr(), x.numel(), true, 1.0, out.data_ptr(),
                nullptr, device_of(x), stream_of(x));
}

void squared_error_sum_kernel(const Tensor& out_sum, const Tensor& x, const Tensor& y,
                              double divisor) {
  const Tensor scratch = scratch_doubles(x, kLossScratch);
  squared_error(x.dtype(), x.data_ptr(), y.data_ptr(), x.numel(), false, divisor,
                out_sum.data_ptr(), static_cast<double*>(scratch.data_ptr()), device_of(x),
                stream_of(x));
}

void squared_error_backward_kernel(const Tensor& grad_input, const Tensor& grad, double scale,
                                   const Tensor& x, const Tensor& y) {
  squared_error_backward(x.dtype(), grad_input.data_ptr(), grad.data_ptr(), grad.numel() == 1,
                         2 * scale, x.data_ptr(), y.data_ptr(), x.numel(), device_of(x),
                         stream_of(x));
}

}  // namespace

static const native::RegisterKernel reg_class_loss(native::class_loss_stub, kCUDA,
                                                   &class_loss_kernel);
static const native::RegisterKernel reg_class_loss_backward(native::class_loss_backward_stub, kCUDA,
                                                            &class_loss_backward_kernel);
static const native::RegisterKernel reg_squared_error(native::squared_error_stub, kCUDA,
                                                      &squared_error_kernel);
static const native::RegisterKernel reg_squared_error_sum(native::squared_error_sum_stub, kCUDA,
                                                          &squared_error_sum_kernel);
static const native::RegisterKernel reg_squared_error_backward(
    native::squared_error_backward_stub, kCUDA, &squared_error_backward_kernel);

}  // namespace cuda
}  // namespace loom
