// The CUDA kernels of native::softmax / log_softmax and their backward: the
// contiguous (outer, D, inner) block handed to the launchers of Softmax.h on
// the device's current stream.
#include "tensor/cuda/HostUtil.h"
#include "tensor/cuda/Softmax.h"
#include "tensor/native/Softmax.h"

namespace loom {
namespace cuda {
namespace {

void softmax_kernel(const Tensor& out, const Tensor& x, int64_t outer, int64_t D, int64_t inner,
                    bool log) {
  softmax_forward(x.dtype(), x.data_ptr(), out.data_ptr(), outer, D, inner, log, device_of(x),
                  stream_of(x));
}

void softmax_backward_kernel(const Tensor& grad_input, const Tensor& grad, const Tensor& output,
                             int64_t outer, int64_t D, int64_t inner, bool log) {
  softmax_backward(output.dtype(), grad.data_ptr(), output.data_ptr(), grad_input.data_ptr(),
                   outer, D, inner, log, device_of(output), stream_of(output));
}

}  // namespace

static const native::RegisterKernel reg_softmax(native::softmax_stub, kCUDA, &softmax_kernel);
static const native::RegisterKernel reg_softmax_backward(native::softmax_backward_stub, kCUDA,
                                                         &softmax_backward_kernel);

}  // namespace cuda
}  // namespace loom
