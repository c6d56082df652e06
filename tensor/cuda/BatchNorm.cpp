// The CUDA backend of batch norm: kernels for the dispatch slots of
// native/Normalization.h.  native::batch_norm has checked the arguments and
// made the input and parameters contiguous (channels-last dense where the
// shape says channels_last); this picks the layout's kernels (BatchNorm.cu for
// NCHW, BatchNormChannelsLast.cu for NHWC), lends them their double scratch
// (per-channel coefficients and partial sums, from the caching allocator),
// runs the running-statistics update on contiguous copies when the running
// tensors are strided (copying back after), and bumps their versions as the
// CPU kernel does.
#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/cuda/BatchNorm.h"
#include "tensor/cuda/BatchNormChannelsLast.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Normalization.h"

namespace loom {
namespace cuda {
namespace {

void* ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// Per-channel statistics handed back to the backward must sit beside the input.
void check_stat(const Tensor& x, const Tensor& t, const char* name) {
  const DType want = native::batch_norm_stats_dtype(x.dtype());
  LOOM_CHECK(t.defined() && t.device() == x.device() && t.dtype() == want &&
                 t.numel() == x.size(1),
             "batch_norm_backward: expected ", name, " of shape [", x.size(1), "] and dtype ",
             dtype_name(want), " on ", x.device().str(), ", got ",
             t.defined() ? t.describe() : std::string("an undefined tensor"));
}

// Whether t is dense in the layout of shape s (channels last or contiguous),
// as the kernels read the activations beside x.
bool dense_like(const native::BatchNormShape& s, const Tensor& t) {
  return s.channels_last ? t.is_contiguous(MemoryFormat::kChannelsLast) : t.is_contiguous();
}

int64_t scratch_doubles(const native::BatchNormShape& s, bool backward, int device) {
  return s.channels_last ? batch_norm_channels_last_scratch_doubles(s, backward, device)
                         : batch_norm_scratch_doubles(s, backward, device);
}

// float16 and bfloat16 activations run as they are (float32 statistics).
bool batch_norm_takes_kernel(DType dtype) { return is_reduced_float(dtype); }

// The ReLU and the residual add are fused for every dtype the kernels take.
bool batch_norm_fuses_relu_kernel(DType) { return true; }

// Channels-last inputs of every dtype the kernels take run as they are
// (BatchNormChannelsLast.cu).
bool batch_norm_channels_last_kernel(DType dtype) {
  return dtype == kFloat32 || dtype == kFloat64 || is_reduced_float(dtype);
}

}  // namespace

void batch_norm_kernel(const native::BatchNormShape& s, const Tensor& x,
                       const Tensor& residual, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, bool training,
                       double momentum, double eps, const Tensor& out, const Tensor& save_mean,
                       const Tensor& save_invstd) {
  LOOM_CHECK(!s.residual || (residual.defined() && residual.dtype() == x.dtype() &&
                             residual.device() == x.device() && residual.sizes() == x.sizes() &&
                             dense_like(s, residual)),
             "batch_norm: the fused residual must be a ",
             s.channels_last ? "channels-last dense" : "contiguous", " tensor like the input ",
             x.describe(), ", got ", residual.defined() ? residual.describe() : "none");
  const int device = x.device().index;
  // a and shift of y = x * a + shift per channel, then the tiles' partial sums
  const Tensor scratch = empty({scratch_doubles(s, false, device)},
                               TensorOptions(kFloat64).device(x.device()));
  const bool update = training && running_mean.defined();
  Tensor rm, rv;  // (C) contiguous running statistics (maybe copies)
  if (running_mean.defined()) {
    rm = native::contiguous(running_mean);
    rv = native::contiguous(running_var);
  }
  const auto forward = s.channels_last ? &batch_norm_channels_last_forward : &batch_norm_forward;
  forward(x.dtype(), s, x.data_ptr(), s.residual ? residual.data_ptr() : nullptr, ptr(weight),
          ptr(bias), update || !training ? ptr(rm) : nullptr,
          update || !training ? ptr(rv) : nullptr, training, momentum, eps, out.data_ptr(),
          save_mean.data_ptr(), save_invstd.data_ptr(), static_cast<double*>(scratch.data_ptr()),
          device, current_stream_handle(device));
  if (update) {
    if (!rm.is_same(running_mean)) native::copy_(running_mean, rm);
    if (!rv.is_same(running_var)) native::copy_(running_var, rv);
    running_mean.bump_version();
    running_var.bump_version();
  }
}

void batch_norm_backward_kernel(const native::BatchNormShape& s, const Tensor& grad_output,
                                const Tensor& y, const Tensor& x, const Tensor& weight,
                                const Tensor& save_mean, const Tensor& save_invstd, bool training,
                                const Tensor& grad_input, const Tensor& grad_weight,
                                const Tensor& grad_bias) {
  LOOM_CHECK(!s.relu || (y.defined() && y.dtype() == x.dtype() && y.device() == x.device() &&
                         y.sizes() == x.sizes() && dense_like(s, y)),
             "batch_norm_backward: the fused ReLU's output must be a ",
             s.channels_last ? "channels-last dense" : "contiguous", " tensor like the input ",
             x.describe(), ", got ", y.defined() ? y.describe() : "none");
  check_stat(x, save_mean, "save_mean");
  check_stat(x, save_invstd, "save_invstd");
  const int device = x.device().index;
  // a, b, k of dx = a * dy + b * (x - mean) + k per channel, then the tiles' partial sums
  const Tensor scratch = empty({scratch_doubles(s, true, device)},
                               TensorOptions(kFloat64).device(x.device()));
  const auto backward =
      s.channels_last ? &batch_norm_channels_last_backward : &batch_norm_backward;
  backward(x.dtype(), s, grad_output.data_ptr(), s.relu ? y.data_ptr() : nullptr, x.data_ptr(),
           save_mean.data_ptr(), save_invstd.data_ptr(), ptr(weight), training, ptr(grad_input),
           ptr(grad_weight), ptr(grad_bias), static_cast<double*>(scratch.data_ptr()), device,
           current_stream_handle(device));
}

static const native::RegisterKernel reg_batch_norm_takes(native::batch_norm_takes_stub, kCUDA,
                                                         &batch_norm_takes_kernel);
static const native::RegisterKernel reg_batch_norm(native::batch_norm_stub, kCUDA,
                                                   &batch_norm_kernel);
static const native::RegisterKernel reg_batch_norm_channels_last(
    native::batch_norm_channels_last_stub, kCUDA, &batch_norm_channels_last_kernel);
static const native::RegisterKernel reg_batch_norm_fuses_relu(native::batch_norm_fuses_relu_stub,
                                                              kCUDA,
                                                              &batch_norm_fuses_relu_kernel);
static const native::RegisterKernel reg_batch_norm_backward(native::batch_norm_backward_stub, kCUDA,
                                                            &batch_norm_backward_kernel);

}  // namespace cuda
}  // namespace loom
