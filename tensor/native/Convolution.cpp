#include "tensor/native/Convolution.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

DispatchStub<Conv2dForwardKernel> conv2d_forward_stub("conv2d");
DispatchStub<Conv2dBackwardKernel> conv2d_backward_stub("conv2d_backward");
DispatchStub<Conv2dTakesKernel> conv2d_takes_stub("conv2d_takes");
DispatchStub<Conv2dChannelsLastKernel> conv2d_channels_last_stub("conv2d_channels_last");

namespace {

IntList pair_arg(const IntList& v, const char* name) {
  LOOM_CHECK(v.size() == 1 || v.size() == 2, "conv2d: expected ", name,
             " to be one value or a pair {h, w}, got ", shape_str(v));
  return v.size() == 1 ? IntList{v[0], v[0]} : v;
}

// The geometry of a (batched or unbatched) input and a weight of these
// sizes, stride/padding/dilation pairs; no checks.
ConvGeometry shape_geometry(const IntList& input, const IntList& weight, const IntList& stride,
                            const IntList& padding, const IntList& dilation, int64_t groups) {
  const size_t d = input.size();
  ConvGeometry g;
  g.batch = d == 4 ? input[0] : 1;
  g.in_channels = input[d - 3];
  g.height = input[d - 2];
  g.width = input[d - 1];
  g.out_channels = weight[0];
  g.kernel_h = weight[2];
  g.kernel_w = weight[3];
  g.stride_h = stride[0];
  g.stride_w = stride[1];
  g.pad_h = padding[0];
  g.pad_w = padding[1];
  g.dilation_h = dilation[0];
  g.dilation_w = dilation[1];
  g.groups = groups;
  const int64_t eff_h = g.dilation_h * (g.kernel_h - 1) + 1;
  const int64_t eff_w = g.dilation_w * (g.kernel_w - 1) + 1;
  g.out_h = (g.height + 2 * g.pad_h - eff_h) / g.stride_h + 1;
  g.out_w = (g.width + 2 * g.pad_w - eff_w) / g.stride_w + 1;
  return g;
}

// Checks the arguments and returns the geometry for a 4-D input.
// reduced: a float16/bfloat16 input is allowed (the caller decides how it runs).
ConvGeometry conv_geometry(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                const IntList& stride_arg, const IntList& padding_arg,
                                const IntList& dilation_arg, int64_t groups,
                                bool reduced = false) {
  check_defined("conv2d", input, "input");
  check_defined("conv2d", weight, "weight");
  check_same_device("conv2d", input, "input", weight, "weight");
  LOOM_CHECK(input.dim() == 3 || input.dim() == 4,
             "conv2d: expected 3-D (unbatched) or 4-D (batched) input (N, C, H, W), got ",
             input.describe());
  LOOM_CHECK(weight.dim() == 4,
             "conv2d: expected a 4-D weight (out_channels, in_channels / groups, kH, kW), got ",
             weight.describe());
  LOOM_CHECK(input.dtype() == weight.dtype(), "conv2d: input ", input.describe(),
             " and weight ", weight.describe(), " must have the same dtype");
  LOOM_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64 ||
                 (reduced && is_reduced_float(input.dtype())),
             "conv2d: expected float32 or float64 tensors, got ", input.describe());
  check_kernel_device("conv2d", input);
  const IntList stride = pair_arg(stride_arg, "stride");
  const IntList padding = pair_arg(padding_arg, "padding");
  const IntList dilation = pair_arg(dilation_arg, "dilation");
  LOOM_CHECK(stride[0] > 0 && stride[1] > 0, "conv2d: stride must be positive, got ",
             shape_str(stride));
  LOOM_CHECK(padding[0] >= 0 && padding[1] >= 0, "conv2d: padding must be non-negative, got ",
             shape_str(padding));
  LOOM_CHECK(dilation[0] > 0 && dilation[1] > 0, "conv2d: dilation must be positive, got ",
             shape_str(dilation));
  LOOM_CHECK(groups > 0, "conv2d: groups must be positive, got ", groups);
  ConvGeometry g = shape_geometry(input.sizes(), weight.sizes(), stride, padding, dilation, groups);
  LOOM_CHECK(g.out_channels % groups == 0, "conv2d: out_channels (weight.size(0) = ",
             g.out_channels, " in weight ", shape_str(weight.sizes()),
             ") must be divisible by groups (", groups, ")");
  LOOM_CHECK(g.in_channels == weight.size(1) * groups, "conv2d: given groups=", groups,
             ", weight of size ", shape_str(weight.sizes()), ", expected input ",
             shape_str(input.sizes()), " to have ", weight.size(1) * groups,
             " channels, but got ", g.in_channels, " channels instead");
  const int64_t eff_h = g.dilation_h * (g.kernel_h - 1) + 1;
  const int64_t eff_w = g.dilation_w * (g.kernel_w - 1) + 1;
  const int64_t padded_h = g.height + 2 * g.pad_h, padded_w = g.width + 2 * g.pad_w;
  LOOM_CHECK(g.kernel_h > 0 && g.kernel_w > 0 && eff_h <= padded_h && eff_w <= padded_w,
             "conv2d: calculated padded input size per channel: (", padded_h, " x ", padded_w,
             "). Kernel size: (", eff_h, " x ", eff_w,
             "). Kernel size can't be greater than actual input size (input ",
             shape_str(input.sizes()), ", weight ", shape_str(weight.sizes()), ")");
  if (bias.defined()) {
    check_same_device("conv2d", input, "input", bias, "bias");
    LOOM_CHECK(bias.dtype() == input.dtype(), "conv2d: expected bias of dtype ",
               dtype_name(input.dtype()), ", got ", bias.describe());
    LOOM_CHECK(bias.dim() == 1 && bias.size(0) == g.out_channels,
               "conv2d: expected bias of shape [", g.out_channels, "] for weight ",
               shape_str(weight.sizes()), ", got ", shape_str(bias.sizes()));
  }
  return g;
}

IntList output_shape(const ConvGeometry& g, bool batched) {
  if (batched) return {g.batch, g.out_channels, g.out_h, g.out_w};
  return {g.out_channels, g.out_h, g.out_w};
}

// Whether a 16-bit input's passes run in its own dtype on its device.
bool runs_in_reduced(const Tensor& input, const ConvGeometry& g, int passes) {
  return conv2d_takes_stub.answer_or(false, input.device(), g, input.dtype(), passes);
}

// The layout of these passes: channels last (g.channels_last) where the
// input or the weight is channels last, as in PyTorch, and the device's
// kernels run them so; else NCHW.
ConvGeometry with_layout(ConvGeometry g, const Tensor& input, const Tensor& weight, int passes) {
  constexpr MemoryFormat kChannelsLast = MemoryFormat::kChannelsLast;
  g.channels_last = input.dim() == 4 &&
                    (input.suggest_memory_format() == kChannelsLast ||
                     weight.suggest_memory_format() == kChannelsLast) &&
                    conv2d_channels_last_stub.answer_or(false, input.device(), g, input.dtype(),
                                                        passes);
  return g;
}

// The kernels on operands conv_geometry has checked (g is theirs).
Tensor conv2d_checked(ConvGeometry g, const Tensor& input, const Tensor& weight,
                      const Tensor& bias) {
  g = with_layout(g, input, weight, kConv2dForward);
  const MemoryFormat format = channels_last_if(g.channels_last);
  Tensor out = empty(output_shape(g, input.dim() == 4),
                     TensorOptions(input.dtype()).device(input.device()), format);
  const Tensor x = contiguous(input, format), w = contiguous(weight);
  const Tensor b = bias.defined() ? contiguous(bias) : Tensor();
  conv2d_forward_stub(input.device(), g, x, w, b, out);
  return out;
}

void conv2d_backward_checked(ConvGeometry g, const Tensor& grad_output,
                             const Tensor& input, const Tensor& weight, bool need_input,
                             bool need_weight, bool need_bias, Tensor& grad_input,
                             Tensor& grad_weight, Tensor& grad_bias) {
  const IntList out_shape = output_shape(g, input.dim() == 4);
  LOOM_CHECK(grad_output.sizes() == out_shape, "conv2d_backward: expected grad_output of shape ",
             shape_str(out_shape), ", got ", grad_output.describe());
  if (!need_input && !need_weight && !need_bias) return;
  g = with_layout(g, input, weight,
                  (need_input ? kConv2dBackwardData : 0) |
                      (need_weight || need_bias ? kConv2dBackwardWeights : 0));
  const MemoryFormat format = channels_last_if(g.channels_last);
  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  const Tensor go = contiguous(to(grad_output, input.device(), input.dtype()), format);
  const Tensor x = contiguous(input, format), w = contiguous(weight);
  if (need_input) grad_input = empty(input.sizes(), options, format);
  if (need_weight) grad_weight = empty(weight.sizes(), options);
  if (need_bias) grad_bias = empty({g.out_channels}, options);
  conv2d_backward_stub(input.device(), g, x, w, go, need_input ? grad_input : Tensor(),
                       need_weight ? grad_weight : Tensor(), need_bias ? grad_bias : Tensor());
}

}  // namespace

bool conv2d_prefers_channels_last(Device device, DType dtype, const IntList& input_sizes,
                                  const IntList& weight_sizes, const IntList& stride,
                                  const IntList& padding, const IntList& dilation,
                                  int64_t groups) {
  if (input_sizes.size() != 4 || weight_sizes.size() != 4) return false;
  const ConvGeometry g =
      shape_geometry(input_sizes, weight_sizes, pair_arg(stride, "stride"),
                     pair_arg(padding, "padding"), pair_arg(dilation, "dilation"), groups);
  if (g.out_h < 1 || g.out_w < 1 || g.groups < 1) return false;
  return conv2d_channels_last_stub.answer_or(
      false, device, g, dtype, kConv2dForward | kConv2dBackwardData | kConv2dBackwardWeights);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntList stride,
              IntList padding, IntList dilation, int64_t groups) {
  // float16/bfloat16: in that dtype where the device's kernels take it
  // (oneDNN's bfloat16 kernels on the CPU), else computed in float32 and
  // rounded once.
  const bool reduced = input.defined() && weight.defined() && is_reduced_float(input.dtype()) &&
                       weight.dtype() == input.dtype() &&
                       (!bias.defined() || bias.dtype() == input.dtype());
  const ConvGeometry g =
      conv_geometry(input, weight, bias, stride, padding, dilation, groups, reduced);
  if (reduced && !runs_in_reduced(input, g, kConv2dForward))
    return round_to(conv2d_checked(g, widen(input), widen(weight), widen(bias)), input.dtype());
  return conv2d_checked(g, input, weight, bias);
}

void conv2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                     IntList stride, IntList padding, IntList dilation, int64_t groups,
                     bool need_input, bool need_weight, bool need_bias, Tensor& grad_input,
                     Tensor& grad_weight, Tensor& grad_bias) {
  const bool reduced = is_reduced_float(input.dtype());
  // The gradients of a 16-bit input computed in float32, in its dtype.
  const auto round_grads = [&] {
    grad_input = round_to(grad_input, input.dtype());
    grad_weight = round_to(grad_weight, input.dtype());
    grad_bias = round_to(grad_bias, input.dtype());
  };
  if (reduced && !(weight.defined() && weight.dtype() == input.dtype())) {
    // A 16-bit input beside a weight of another dtype: both in float32.
    conv2d_backward(widen(grad_output), widen(input), widen(weight), stride, padding, dilation,
                    groups, need_input, need_weight, need_bias, grad_input, grad_weight,
                    grad_bias);
    round_grads();
    return;
  }
  const ConvGeometry g =
      conv_geometry(input, weight, Tensor(), stride, padding, dilation, groups, reduced);
  // float16/bfloat16 as in conv2d: in that dtype where the kernels take it.
  const int passes = (need_input ? kConv2dBackwardData : 0) |
                     (need_weight || need_bias ? kConv2dBackwardWeights : 0);
  if (reduced && !runs_in_reduced(input, g, passes)) {
    conv2d_backward_checked(g, widen(grad_output), widen(input), widen(weight), need_input,
                            need_weight, need_bias, grad_input, grad_weight, grad_bias);
    round_grads();
    return;
  }
  conv2d_backward_checked(g, grad_output, input, weight, need_input, need_weight, need_bias,
                          grad_input, grad_weight, grad_bias);
}

}  // namespace native
}  // namespace loom
