#include "tensor/native/Pooling.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace native {

DispatchStub<MaxPool2dKernel> max_pool2d_stub("max_pool2d");
DispatchStub<MaxPool2dBackwardKernel> max_pool2d_backward_stub("max_pool2d_backward");
DispatchStub<MaxPool2dTakesKernel> max_pool2d_takes_stub("max_pool2d_takes");
DispatchStub<MaxPool2dChannelsLastKernel> max_pool2d_channels_last_stub(
    "max_pool2d_channels_last");
DispatchStub<AvgPool2dKernel> avg_pool2d_stub("avg_pool2d");
DispatchStub<AvgPool2dBackwardKernel> avg_pool2d_backward_stub("avg_pool2d_backward");
DispatchStub<AdaptiveAvgPool2dKernel> adaptive_avg_pool2d_stub("adaptive_avg_pool2d");
DispatchStub<AdaptiveAvgPool2dBackwardKernel> adaptive_avg_pool2d_backward_stub(
    "adaptive_avg_pool2d_backward");

namespace {

IntList pair_arg(const char* op, const IntList& v, const char* name) {
  LOOM_CHECK(v.size() == 1 || v.size() == 2, op, ": expected ", name,
             " to be one value or a pair {h, w}, got ", shape_str(v));
  return v.size() == 1 ? IntList{v[0], v[0]} : v;
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// PyTorch's pooling_output_shape.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                    bool ceil_mode) {
  int64_t out =
      floor_div(in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// A float16/bfloat16 tensor the device's max-pool kernels do not take as it
// is: computed in float32 and rounded once.
bool max_pool_widens(const Tensor& t) {
  return is_reduced_float(t.dtype()) &&
         !max_pool2d_takes_stub.answer_or(false, t.device(), t.dtype());
}

void check_input(const char* op, const Tensor& input) {
  check_defined(op, input, "input");
  LOOM_CHECK(input.dim() == 3 || input.dim() == 4, op,
             ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got ", input.describe());
  for (int64_t d = input.dim() - 3; d < input.dim(); ++d)
    LOOM_CHECK(input.size(d) > 0, op,
               ": expected non-zero sizes for the channel and spatial dims, got ",
               input.describe());
  // 16-bit floats reach here only where the device's kernels take them.
  LOOM_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64 ||
                 (is_reduced_float(input.dtype()) && !max_pool_widens(input)),
             op, ": expected a float32 or float64 input, got ", input.describe());
  check_kernel_device(op, input);
}

PoolGeometry pool_geometry(const char* op, const Tensor& input, const IntList& kernel_arg,
                                const IntList& stride_arg, const IntList& padding_arg,
                                const IntList& dilation_arg, bool ceil_mode) {
  check_input(op, input);
  const IntList kernel = pair_arg(op, kernel_arg, "kernel_size");
  const IntList stride = stride_arg.empty() ? kernel : pair_arg(op, stride_arg, "stride");
  const IntList padding = pair_arg(op, padding_arg, "padding");
  const IntList dilation = pair_arg(op, dilation_arg, "dilation");
  LOOM_CHECK(kernel[0] > 0 && kernel[1] > 0, op, ": kernel_size must be positive, got ",
             shape_str(kernel));
  LOOM_CHECK(stride[0] > 0 && stride[1] > 0, op, ": stride must be positive, got ",
             shape_str(stride));
  LOOM_CHECK(dilation[0] > 0 && dilation[1] > 0, op, ": dilation must be positive, got ",
             shape_str(dilation));
  LOOM_CHECK(padding[0] >= 0 && padding[1] >= 0 && padding[0] <= kernel[0] / 2 &&
                 padding[1] <= kernel[1] / 2,
             op, ": pad should be at most half of kernel size, but got padding ",
             shape_str(padding), " for kernel_size ", shape_str(kernel));
  PoolGeometry g;
  g.height = input.size(-2);
  g.width = input.size(-1);
  g.planes = input.numel() / (g.height * g.width);
  g.kernel_h = kernel[0];
  g.kernel_w = kernel[1];
  g.stride_h = stride[0];
  g.stride_w = stride[1];
  g.pad_h = padding[0];
  g.pad_w = padding[1];
  g.dilation_h = dilation[0];
  g.dilation_w = dilation[1];
  g.out_h = pooled_size(g.height, g.kernel_h, g.pad_h, g.stride_h, g.dilation_h, ceil_mode);
  g.out_w = pooled_size(g.width, g.kernel_w, g.pad_w, g.stride_w, g.dilation_w, ceil_mode);
  LOOM_CHECK(g.out_h >= 1 && g.out_w >= 1, op, ": given input size ", shape_str(input.sizes()),
             ", the calculated output size (", g.out_h, " x ", g.out_w,
             ") is too small for kernel_size ", shape_str(kernel), ", stride ",
             shape_str(stride), ", padding ", shape_str(padding), ", dilation ",
             shape_str(dilation));
  return g;
}

IntList pooled_shape(const Tensor& input, const PoolGeometry& g) {
  IntList shape = input.sizes();
  shape[shape.size() - 2] = g.out_h;
  shape[shape.size() - 1] = g.out_w;
  return shape;
}

Tensor grad_like(const Tensor& grad_output, const IntList& expected, const char* op) {
  LOOM_CHECK(grad_output.sizes() == expected, op, ": expected grad_output of shape ",
             shape_str(expected), ", got ", grad_output.describe());
  return contiguous(grad_output);
}

// An uninitialised grad_input of the forward input's shape, checked like an input.
Tensor new_grad_input(const char* op, const Tensor& grad_output, const IntList& input_sizes,
                      MemoryFormat format = MemoryFormat::kContiguous) {
  check_defined(op, grad_output, "grad_output");
  Tensor gi = empty(input_sizes, TensorOptions(grad_output.dtype()).device(grad_output.device()),
                    format);
  check_input(op, gi);
  return gi;
}

// Whether t (a max-pool input, or the indices of one) is a channels-last
// 4-D tensor the device's max-pool kernels take as it is.
bool max_pools_channels_last(const Tensor& t, DType dtype) {
  return t.suggest_memory_format() == MemoryFormat::kChannelsLast &&
         max_pool2d_channels_last_stub.answer_or(false, t.device(), dtype);
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntList kernel_size,
                                                   IntList stride, IntList padding,
                                                   IntList dilation, bool ceil_mode) {
  if (input.defined() && max_pool_widens(input)) {
    auto [values, indices] =
        max_pool2d_with_indices(widen(input), kernel_size, stride, padding, dilation, ceil_mode);
    return {round_to(values, input.dtype()), indices};
  }
  PoolGeometry g =
      pool_geometry("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode);
  if (max_pools_channels_last(input, input.dtype())) {
    g.channels_last = true;
    g.channels = input.size(1);
  }
  const IntList shape = pooled_shape(input, g);
  const MemoryFormat format = channels_last_if(g.channels_last);
  Tensor out = empty(shape, TensorOptions(input.dtype()).device(input.device()), format);
  Tensor indices = empty(shape, TensorOptions(kInt64).device(input.device()), format);
  const Tensor x = contiguous(input, format);
  max_pool2d_stub(x.device(), g, x, out, indices);
  return {out, indices};
}

Tensor max_pool2d_backward(const Tensor& grad_output, const IntList& input_sizes,
                           IntList kernel_size, IntList stride, IntList padding,
                           IntList dilation, bool ceil_mode, const Tensor& indices) {
  if (grad_output.defined() && max_pool_widens(grad_output))
    return round_to(max_pool2d_backward(widen(grad_output), input_sizes, kernel_size, stride,
                                        padding, dilation, ceil_mode, indices),
                    grad_output.dtype());
  check_defined("max_pool2d_backward", grad_output, "grad_output");
  check_defined("max_pool2d_backward", indices, "indices");
  LOOM_CHECK(indices.dtype() == kInt64 && indices.sizes() == grad_output.sizes(),
             "max_pool2d_backward: expected int64 indices shaped like grad_output ",
             grad_output.describe(), ", got ", indices.describe());
  // Channels-last indices come from a channels-last forward: the gradient
  // is laid out so too.
  const bool channels_last =
      input_sizes.size() == 4 && max_pools_channels_last(indices, grad_output.dtype());
  const MemoryFormat format = channels_last_if(channels_last);
  Tensor grad_input = new_grad_input("max_pool2d_backward", grad_output, input_sizes, format);
  PoolGeometry g = pool_geometry("max_pool2d_backward", grad_input, kernel_size, stride, padding,
                                 dilation, ceil_mode);
  if (channels_last) {
    g.channels_last = true;
    g.channels = input_sizes[1];
  }
  const IntList pooled = pooled_shape(grad_input, g);
  LOOM_CHECK(grad_output.sizes() == pooled, "max_pool2d_backward: expected grad_output of shape ",
             shape_str(pooled), " for these window arguments, got ", grad_output.describe());
  check_same_device("max_pool2d_backward", grad_output, "grad_output", indices, "indices");
  const Tensor go = contiguous(grad_output, format);
  const Tensor ix = contiguous(indices, format);
  max_pool2d_backward_stub(grad_input.device(), g, go, ix, grad_input);
  return grad_input;
}

Tensor avg_pool2d(const Tensor& input, IntList kernel_size, IntList stride, IntList padding,
                  bool ceil_mode, bool count_include_pad) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype()))
    return round_to(avg_pool2d(widen(input), kernel_size, stride, padding, ceil_mode,
                               count_include_pad),
                    input.dtype());
  const PoolGeometry g =
      pool_geometry("avg_pool2d", input, kernel_size, stride, padding, {1, 1}, ceil_mode);
  Tensor out = empty(pooled_shape(input, g), TensorOptions(input.dtype()).device(input.device()));
  const Tensor x = contiguous(input);
  avg_pool2d_stub(x.device(), g, count_include_pad, x, out);
    return out;
}

Tensor avg_pool2d_backward(const Tensor& grad_output, const IntList& input_sizes,
                           IntList kernel_size, IntList stride, IntList padding, bool ceil_mode,
                           bool count_include_pad) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (grad_output.defined() && is_reduced_float(grad_output.dtype()))
    return round_to(avg_pool2d_backward(widen(grad_output), input_sizes, kernel_size, stride,
                                        padding, ceil_mode, count_include_pad),
                    grad_output.dtype());
  Tensor grad_input = new_grad_input("avg_pool2d_backward", grad_output, input_sizes);
  const Tensor& input = grad_input;
  const PoolGeometry g = pool_geometry("avg_pool2d_backward", input, kernel_size, stride,
                                            padding, {1, 1}, ceil_mode);
  const Tensor go = grad_like(grad_output, pooled_shape(input, g), "avg_pool2d_backward");
  avg_pool2d_backward_stub(grad_input.device(), g, count_include_pad, go, grad_input);
    return grad_input;
}

namespace {
PoolGeometry adaptive_geometry(const char* op, const Tensor& input, const IntList& size) {
  check_input(op, input);
  LOOM_CHECK(size.size() == 1 || size.size() == 2, op,
             ": expected output_size to be one value or a pair {h, w}, got ", shape_str(size));
  const IntList out = size.size() == 1 ? IntList{size[0], size[0]} : size;
  LOOM_CHECK(out[0] >= 0 && out[1] >= 0, op,
             ": elements of output_size must be greater than or equal to 0, got ",
             shape_str(out));
  PoolGeometry g;
  g.height = input.size(-2);
  g.width = input.size(-1);
  g.planes = input.numel() / (g.height * g.width);
  g.out_h = out[0];
  g.out_w = out[1];
  return g;
}
}  // namespace

Tensor adaptive_avg_pool2d(const Tensor& input, IntList output_size) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype()))
    return round_to(adaptive_avg_pool2d(widen(input), output_size), input.dtype());
  const PoolGeometry g = adaptive_geometry("adaptive_avg_pool2d", input, output_size);
  Tensor out = empty(pooled_shape(input, g), TensorOptions(input.dtype()).device(input.device()));
  if (out.numel() == 0) return out;
  const Tensor x = contiguous(input);
  adaptive_avg_pool2d_stub(x.device(), g, x, out);
    return out;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_output, const IntList& input_sizes) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (grad_output.defined() && is_reduced_float(grad_output.dtype()))
    return round_to(adaptive_avg_pool2d_backward(widen(grad_output), input_sizes),
                    grad_output.dtype());
  Tensor grad_input = new_grad_input("adaptive_avg_pool2d_backward", grad_output, input_sizes);
  const Tensor& input = grad_input;
  LOOM_CHECK(grad_output.dim() == input.dim(),
             "adaptive_avg_pool2d_backward: expected grad_output of rank ", input.dim(),
             ", got ", grad_output.describe());
  const PoolGeometry g = adaptive_geometry("adaptive_avg_pool2d_backward", input,
                                                {grad_output.size(-2), grad_output.size(-1)});
  const Tensor go =
      grad_like(grad_output, pooled_shape(input, g), "adaptive_avg_pool2d_backward");
  adaptive_avg_pool2d_backward_stub(grad_input.device(), g, go, grad_input);
    return grad_input;
}

}  // namespace native
}  // namespace loom
