// The CUDA kernels of group_norm_stub and group_norm_backward_stub: Tensor
// glue around the launchers of GroupNorm.cu.  native::group_norm has checked
// the arguments and made every tensor contiguous; this lends the backward its
// double scratch from the caching allocator and queues everything on the
// device's current stream.
#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"
#include "tensor/cuda/GroupNorm.h"
#include "tensor/native/GroupNorm.h"

namespace loom {
namespace cuda {
namespace {

const void* cptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

void group_norm_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t N,
                       int64_t C, int64_t HxW, int64_t group, double eps, const Tensor& out,
                       const Tensor& mean, const Tensor& rstd) {
  const int device = input.device().index;
  group_norm_forward(input.dtype(), cptr(input), cptr(weight), cptr(bias), N, C, HxW, group, eps,
                     ptr(out), ptr(mean), ptr(rstd), device, current_stream_handle(device));
}

void group_norm_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& mean,
                                const Tensor& rstd, const Tensor& weight, int64_t N, int64_t C,
                                int64_t HxW, int64_t group, const Tensor& grad_input,
                                const Tensor& grad_weight, const Tensor& grad_bias) {
  const int device = input.device().index;
  const Tensor scratch = empty({group_norm_backward_scratch(N, C, group)},
                               TensorOptions(kFloat64).device(input.device()));
  group_norm_backward(input.dtype(), cptr(grad_out), cptr(input), cptr(mean), cptr(rstd),
                      cptr(weight), N, C, HxW, group, ptr(grad_input), ptr(grad_weight),
                      ptr(grad_bias), static_cast<double*>(scratch.data_ptr()), device,
                      current_stream_handle(device));
}

}  // namespace

static const native::RegisterKernel reg_group_norm(native::group_norm_stub, kCUDA,
                                                   &group_norm_kernel);
static const native::RegisterKernel reg_group_norm_backward(native::group_norm_backward_stub, kCUDA,
                                                            &group_norm_backward_kernel);

}  // namespace cuda
}  // namespace loom
