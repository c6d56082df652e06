// The CUDA backend of conv2d: kernels for the dispatch slots of
// native/Convolution.h.  native::conv2d has
// already checked the arguments, worked out the geometry and made every
// operand contiguous, NCHW or (g.channels_last) NHWC; this checks cuDNN's
// 32-bit limits, answers the
// empty cases itself (cuDNN rejects zero-sized descriptors: an empty output,
// zero input channels, an empty batch), lends the launcher workspace from
// the caching allocator (uint8 tensors on the device, freed stream-ordered
// after the call) and passes the TF32 / benchmark switches of CudaFlags.h.
// float16 and bfloat16 reach cuDNN as they are (conv2d_takes), channels
// last while cudnn_channels_last is on (conv2d_channels_last): the weight
// then goes to cuDNN as OHWI and its gradient comes back so.
#include <climits>

#include "tensor/CudaFlags.h"
#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/cuda/Conv.h"
#include "tensor/native/Binary.h"
#include "tensor/native/BinaryOps.h"
#include "tensor/native/Convolution.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Reduce.h"
#include "tensor/native/Views.h"

namespace loom {
namespace cuda {
namespace {

ConvOptions options_for(const Tensor& t) {
  ConvOptions o;
  o.allow_tf32 = cudnn_allow_tf32();
  o.benchmark = cudnn_benchmark();
  o.device = t.device().index;
  o.stream = current_stream_handle(o.device);
  return o;
}

// cuDNN's legacy API takes int sizes and tensors of fewer than 2^31 elements.
void check_limits(const native::ConvGeometry& g) {
  const int64_t sizes[] = {g.batch,    g.in_channels, g.height,   g.width,    g.out_channels,
                           g.kernel_h, g.kernel_w,    g.out_h,    g.out_w,    g.stride_h,
                           g.stride_w, g.pad_h,       g.pad_w,    g.dilation_h, g.dilation_w};
  for (int64_t s : sizes)
    LOOM_CHECK(s <= INT_MAX, "conv2d on CUDA: size ", s, " exceeds cuDNN's 32-bit limit");
  const int64_t in = g.batch * g.in_channels * g.height * g.width;
  const int64_t out = g.batch * g.out_channels * g.out_h * g.out_w;
  LOOM_CHECK(in < INT_MAX && out < INT_MAX, "conv2d on CUDA: input (", g.batch, ", ",
             g.in_channels, ", ", g.height, ", ", g.width, ") or output (", g.batch, ", ",
             g.out_channels, ", ", g.out_h, ", ", g.out_w,
             ") has 2^31 or more elements, more than cuDNN takes; split the batch");
}

// Lends the launcher its workspace: one block, replaced by a larger one when
// a pass (or the next algorithm candidate) asks for more.  The old block
// goes back to the caching allocator at once: it belongs to this stream,
// so its reuse is ordered after the work already queued on it.
class Workspaces {
 public:
  explicit Workspaces(Device device) : device_(device) {}
  WorkspaceFn fn() {
    return [this](size_t bytes) {
      if (!block_.defined() || static_cast<size_t>(block_.numel()) < bytes) {
        block_ = Tensor();  // freed before the larger one is asked for
        block_ = empty({static_cast<int64_t>(bytes)}, TensorOptions(kUInt8).device(device_));
      }
      return block_.data_ptr();
    };
  }

 private:
  Device device_;
  Tensor block_;  // uint8, at least the largest size asked for so far
};

// The output-shaped (N, O, OH, OW) view of an output or its gradient (3-D
// when the input was unbatched), in whichever layout it has.
Tensor output4(const native::ConvGeometry& g, const Tensor& t) {
  return native::view(t, {g.batch, g.out_channels, g.out_h, g.out_w});
}

// grad_output summed over N and the pixels (float32 accumulation for 16-bit
// dtypes), into grad_bias.
void bias_gradient(const native::ConvGeometry& g, const Tensor& grad_output,
                   const Tensor& grad_bias) {
  native::copy_(grad_bias, native::sum(output4(g, grad_output), {0, 2, 3}, false));
}

// Whether loom adds the bias and sums its gradient itself (a broadcast add
// and a float32 sum, one rounding: what cuDNN's float32 compute type gives)
// rather than cudnnAddTensor / cudnnConvolutionBackwardBias: for bfloat16,
// whose support there cuDNN does not document, and for channels-last
// outputs beside the bias's NCHW (1, O, 1, 1) descriptor.
bool own_bias(const native::ConvGeometry& g, DType dtype) {
  return dtype == kBFloat16 || g.channels_last;
}

// The weight as cuDNN reads it: OIHW, or OHWI for a channels-last pass (one
// copy of the weight a call, as PyTorch's weight.contiguous(memory_format)).
Tensor weight_for(const native::ConvGeometry& g, const Tensor& weight) {
  return g.channels_last ? native::contiguous(weight, MemoryFormat::kChannelsLast) : weight;
}

bool empty_problem(const native::ConvGeometry& g) {
  return g.batch == 0 || g.in_channels == 0 || g.height == 0 || g.width == 0 ||
         g.out_channels == 0 || g.out_h == 0 || g.out_w == 0;
}

}  // namespace

void conv2d_forward_kernel(const native::ConvGeometry& g, const Tensor& input, const Tensor& weight,
                           const Tensor& bias, const Tensor& out) {
  if (out.numel() == 0) return;
  if (empty_problem(g)) {  // no input terms: out = bias (or 0)
    const Tensor out4 = output4(g, out);
    if (bias.defined())
      native::copy_(out4, native::expand(native::view(bias, {1, g.out_channels, 1, 1}),
                                         {g.batch, g.out_channels, g.out_h, g.out_w}));
    else
      native::fill_(out, 0);
    return;
  }
  check_limits(g);
  Workspaces ws(input.device());
  const bool add_bias = bias.defined() && own_bias(g, input.dtype());
  conv2d_forward(input.dtype(), g, input.data_ptr(), weight_for(g, weight).data_ptr(),
                 bias.defined() && !add_bias ? bias.data_ptr() : nullptr, out.data_ptr(),
                 options_for(input), ws.fn());
  if (add_bias)
    native::binary_(native::binary_op<optable::Add>(), output4(g, out),
                    native::view(bias, {1, g.out_channels, 1, 1}));
}

void conv2d_backward_kernel(const native::ConvGeometry& g, const Tensor& input,
                            const Tensor& weight, const Tensor& grad_output,
                            const Tensor& grad_input, const Tensor& grad_weight,
                            const Tensor& grad_bias) {
  if (empty_problem(g)) {  // every gradient is an empty sum (0), or has no elements
    if (grad_input.defined() && grad_input.numel() > 0) native::fill_(grad_input, 0);
    if (grad_weight.defined() && grad_weight.numel() > 0) native::fill_(grad_weight, 0);
    if (grad_bias.defined() && grad_bias.numel() > 0) {
      if (grad_output.numel() == 0) {
        native::fill_(grad_bias, 0);
      } else {
        bias_gradient(g, grad_output, grad_bias);
      }
    }
    return;
  }
  check_limits(g);
  Workspaces ws(input.device());
  auto ptr = [](const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; };
  const bool sum_bias = grad_bias.defined() && own_bias(g, input.dtype());
  // A channels-last pass writes the weight gradient OHWI, then copied into
  // grad_weight's OIHW (the same layout for 1x1 kernels: no copy).
  const Tensor gw = grad_weight.defined() && g.channels_last &&
                            !grad_weight.is_contiguous(MemoryFormat::kChannelsLast)
                        ? empty(grad_weight.sizes(),
                                TensorOptions(grad_weight.dtype()).device(grad_weight.device()),
                                MemoryFormat::kChannelsLast)
                        : grad_weight;
  // The weight is read by the backward-data pass alone.
  const Tensor w = grad_input.defined() ? weight_for(g, weight) : weight;
  conv2d_backward(input.dtype(), g, input.data_ptr(), w.data_ptr(),
                  grad_output.data_ptr(), ptr(grad_input), ptr(gw),
                  sum_bias ? nullptr : ptr(grad_bias), options_for(input), ws.fn());
  if (!gw.is_same(grad_weight)) native::copy_(grad_weight, gw);
  if (sum_bias) bias_gradient(g, grad_output, grad_bias);
}

// float16 and bfloat16 convolutions run in cuDNN as they are (tensor cores,
// float32 accumulation), every pass.
bool conv2d_takes_kernel(const native::ConvGeometry&, DType dtype, int) {
  return dtype == kFloat16 || dtype == kBFloat16;
}

// float16 and bfloat16 convolutions run channels last while
// cudnn_channels_last is on (CudaFlags.h): cuDNN's tensor-core kernels read
// NHWC as it is.  float32 and float64 run NCHW.
bool conv2d_channels_last_kernel(const native::ConvGeometry&, DType dtype, int) {
  return is_reduced_float(dtype) && cudnn_channels_last();
}

static const native::RegisterKernel reg_conv2d_channels_last(native::conv2d_channels_last_stub,
                                                             kCUDA, &conv2d_channels_last_kernel);
static const native::RegisterKernel reg_conv2d_takes(native::conv2d_takes_stub, kCUDA,
                                                     &conv2d_takes_kernel);
static const native::RegisterKernel reg_conv2d_forward(native::conv2d_forward_stub, kCUDA,
                                                       &conv2d_forward_kernel);
static const native::RegisterKernel reg_conv2d_backward(native::conv2d_backward_stub, kCUDA,
                                                        &conv2d_backward_kernel);

}  // namespace cuda
}  // namespace loom
