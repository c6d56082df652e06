// The CUDA backend of the pooling ops: the cuda::*_kernel functions declared
// in Pooling.h.  native::*pool2d* have checked the arguments, computed the
// geometry and made every operand contiguous; this forwards raw pointers to
// the launchers of tensor/cuda/Pooling.h on the device's current stream.
// Without CUDA the launchers are stubs (bottom of this file) that throw; the
// native ops never reach them, as check_kernel_device throws first.
#include "tensor/CudaRuntime.h"
#include "tensor/cpu/Pooling.h"
#include "tensor/cuda/Pooling.h"
#include "tensor/native/Pooling.h"

namespace loom {
namespace cuda {
namespace {

int device_of(const Tensor& t) { return t.device().index; }
uint64_t stream_of(const Tensor& t) { return current_stream_handle(device_of(t)); }
int64_t* index_ptr(const Tensor& t) { return static_cast<int64_t*>(t.data_ptr()); }

}  // namespace

void max_pool2d_kernel(const cpu::PoolGeometry& g, const Tensor& input, const Tensor& out,
                       const Tensor& indices) {
  max_pool2d_forward(input.dtype(), g, input.data_ptr(), out.data_ptr(), index_ptr(indices),
                     device_of(input), stream_of(input));
}

void max_pool2d_backward_kernel(const cpu::PoolGeometry& g, const Tensor& grad_output,
                                const Tensor& indices, const Tensor& grad_input) {
  max_pool2d_backward(grad_input.dtype(), g, grad_output.data_ptr(), index_ptr(indices),
                      grad_input.data_ptr(), device_of(grad_input), stream_of(grad_input));
}

void avg_pool2d_kernel(const cpu::PoolGeometry& g, bool count_include_pad, const Tensor& input,
                       const Tensor& out) {
  avg_pool2d_forward(input.dtype(), g, count_include_pad, input.data_ptr(), out.data_ptr(),
                     device_of(input), stream_of(input));
}

void avg_pool2d_backward_kernel(const cpu::PoolGeometry& g, bool count_include_pad,
                                const Tensor& grad_output, const Tensor& grad_input) {
  avg_pool2d_backward(grad_input.dtype(), g, count_include_pad, grad_output.data_ptr(),
                      grad_input.data_ptr(), device_of(grad_input), stream_of(grad_input));
}

void adaptive_avg_pool2d_kernel(const cpu::PoolGeometry& g, const Tensor& input,
                                const Tensor& out) {
  adaptive_avg_pool2d_forward(input.dtype(), g, input.data_ptr(), out.data_ptr(),
                              device_of(input), stream_of(input));
}

void adaptive_avg_pool2d_backward_kernel(const cpu::PoolGeometry& g, const Tensor& grad_output,
                                         const Tensor& grad_input) {
  adaptive_avg_pool2d_backward(grad_input.dtype(), g, grad_output.data_ptr(),
                               grad_input.data_ptr(), device_of(grad_input),
                               stream_of(grad_input));
}

#ifndef LOOM_WITH_CUDA

namespace {
[[noreturn]] void no_cuda(const char* what) {
  LOOM_FAIL("cuda::", what, ": loom was built without CUDA (no toolkit found at build time, or "
            "LOOM_DISABLE_CUDA=1)");
}
}  // namespace

void max_pool2d_forward(DType, const cpu::PoolGeometry&, const void*, void*, int64_t*, int,
                        uint64_t) {
  no_cuda("max_pool2d_forward");
}
void max_pool2d_backward(DType, const cpu::PoolGeometry&, const void*, const int64_t*, void*,
                         int, uint64_t) {
  no_cuda("max_pool2d_backward");
}
void avg_pool2d_forward(DType, const cpu::PoolGeometry&, bool, const void*, void*, int,
                        uint64_t) {
  no_cuda("avg_pool2d_forward");
}
void avg_pool2d_backward(DType, const cpu::PoolGeometry&, bool, const void*, void*, int,
                         uint64_t) {
  no_cuda("avg_pool2d_backward");
}
void adaptive_avg_pool2d_forward(DType, const cpu::PoolGeometry&, const void*, void*, int,
                                 uint64_t) {
  no_cuda("adaptive_avg_pool2d_forward");
}
void adaptive_avg_pool2d_backward(DType, const cpu::PoolGeometry&, const void*, void*, int,
                                  uint64_t) {
  no_cuda("adaptive_avg_pool2d_backward");
}

#endif  // LOOM_WITH_CUDA

}  // namespace cuda
}  // namespace loom
