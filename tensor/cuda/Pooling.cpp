// The CUDA backend of the pooling ops: kernels for the dispatch slots of
// native/Pooling.h.  native::*pool2d* have checked the arguments, computed the
// geometry and made every operand contiguous (channels-last for a
// channels-last max pooling); this forwards raw pointers to the launchers of
// tensor/cuda/Pooling.h on the device's current stream.  Max pooling answers
// both capability slots: every floating dtype as it is, either layout.
#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Pooling.h"
#include "tensor/native/Pooling.h"

namespace loom {
namespace cuda {
namespace {

int device_of(const Tensor& t) { return t.device().index; }
uint64_t stream_of(const Tensor& t) { return current_stream_handle(device_of(t)); }
int64_t* index_ptr(const Tensor& t) { return static_cast<int64_t*>(t.data_ptr()); }

}  // namespace

// float16 and bfloat16 max pooling runs as it is (no float32 copies).
bool max_pool2d_takes_kernel(DType dtype) { return is_reduced_float(dtype); }

// Channels-last max pooling runs as it is, for every floating dtype.
bool max_pool2d_channels_last_kernel(DType dtype) {
  return dtype == kFloat32 || dtype == kFloat64 || is_reduced_float(dtype);
}

void max_pool2d_kernel(const native::PoolGeometry& g, const Tensor& input, const Tensor& out,
                       const Tensor& indices) {
  max_pool2d_forward(input.dtype(), g, input.data_ptr(), out.data_ptr(), index_ptr(indices),
                     device_of(input), stream_of(input));
}

void max_pool2d_backward_kernel(const native::PoolGeometry& g, const Tensor& grad_output,
                                const Tensor& indices, const Tensor& grad_input) {
  max_pool2d_backward(grad_input.dtype(), g, grad_output.data_ptr(), index_ptr(indices),
                      grad_input.data_ptr(), device_of(grad_input), stream_of(grad_input));
}

void avg_pool2d_kernel(const native::PoolGeometry& g, bool count_include_pad, const Tensor& input,
                       const Tensor& out) {
  avg_pool2d_forward(input.dtype(), g, count_include_pad, input.data_ptr(), out.data_ptr(),
                     device_of(input), stream_of(input));
}

void avg_pool2d_backward_kernel(const native::PoolGeometry& g, bool count_include_pad,
                                const Tensor& grad_output, const Tensor& grad_input) {
  avg_pool2d_backward(grad_input.dtype(), g, count_include_pad, grad_output.data_ptr(),
                      grad_input.data_ptr(), device_of(grad_input), stream_of(grad_input));
}

void adaptive_avg_pool2d_kernel(const native::PoolGeometry& g, const Tensor& input,
                                const Tensor& out) {
  adaptive_avg_pool2d_forward(input.dtype(), g, input.data_ptr(), out.data_ptr(),
                              device_of(input), stream_of(input));
}

void adaptive_avg_pool2d_backward_kernel(const native::PoolGeometry& g, const Tensor& grad_output,
                                         const Tensor& grad_input) {
  adaptive_avg_pool2d_backward(grad_input.dtype(), g, grad_output.data_ptr(),
                               grad_input.data_ptr(), device_of(grad_input),
                               stream_of(grad_input));
}

static const native::RegisterKernel reg_max_pool2d_takes(native::max_pool2d_takes_stub, kCUDA,
                                                         &max_pool2d_takes_kernel);
static const native::RegisterKernel reg_max_pool2d_channels_last(
    native::max_pool2d_channels_last_stub, kCUDA, &max_pool2d_channels_last_kernel);
static const native::RegisterKernel reg_max_pool2d(native::max_pool2d_stub, kCUDA,
                                                   &max_pool2d_kernel);
static const native::RegisterKernel reg_max_pool2d_backward(native::max_pool2d_backward_stub, kCUDA,
                                                            &max_pool2d_backward_kernel);
static const native::RegisterKernel reg_avg_pool2d(native::avg_pool2d_stub, kCUDA,
                                                   &avg_pool2d_kernel);
static const native::RegisterKernel reg_avg_pool2d_backward(native::avg_pool2d_backward_stub, kCUDA,
                                                            &avg_pool2d_backward_kernel);
static const native::RegisterKernel reg_adaptive_avg_pool2d(native::adaptive_avg_pool2d_stub, kCUDA,
                                                            &adaptive_avg_pool2d_kernel);
static const native::RegisterKernel reg_adaptive_avg_pool2d_backward(
    native::adaptive_avg_pool2d_backward_stub, kCUDA, &adaptive_avg_pool2d_backward_kernel);

}  // namespace cuda
}  // namespace loom
