#include "tensor/native/LayerNorm.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace native {

DispatchStub<LayerNormKernel> layer_norm_stub("layer_norm");
DispatchStub<LayerNormBackwardKernel> layer_norm_backward_stub("layer_norm_backward");

namespace {

struct Rows {
  int64_t axis = 0;  // first normalised dim
  int64_t M = 1;     // rows: product of input.sizes()[:axis]
  int64_t N = 1;     // row length: product of normalized_shape
};

// Checks normalized_shape against input's trailing dims (PyTorch's messages).
Rows rows_of(const char* op, const Tensor& input, const IntList& normalized_shape) {
  LOOM_CHECK(!normalized_shape.empty(), op,
             ": expected normalized_shape to be at least 1-dimensional, i.e., containing at "
             "least one element, but got normalized_shape = []");
  for (int64_t d : normalized_shape)
    LOOM_CHECK(d >= 0, op, ": normalized_shape ", shape_str(normalized_shape),
               " has a negative size");
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  const int64_t axis = input.dim() - nd;
  bool match = axis >= 0;
  for (int64_t k = 0; match && k < nd; ++k) match = input.size(axis + k) == normalized_shape[k];
  if (!match) {
    std::string expected = shape_str(normalized_shape);
    expected = "[*, " + expected.substr(1);
    LOOM_FAIL(op, ": given normalized_shape=", shape_str(normalized_shape),
              ", expected input with shape ", expected, ", but got input of size ",
              shape_str(input.sizes()));
  }
  Rows r;
  r.axis = axis;
  for (int64_t d = 0; d < axis; ++d) r.M *= input.size(d);
  for (int64_t d : normalized_shape) r.N *= d;
  return r;
}

// weight / bias: undefined, or normalized_shape of input's dtype on its device.
void check_affine(const char* op, const Tensor& input, const IntList& normalized_shape,
                  const Tensor& t, const char* name) {
  if (!t.defined()) return;
  LOOM_CHECK(t.sizes() == normalized_shape, op, ": expected ", name,
             " to be of same shape as normalized_shape, but got ", name, " of shape ",
             shape_str(t.sizes()), " and normalized_shape = ", shape_str(normalized_shape));
  check_same_device(op, input, "input", t, name);
  LOOM_CHECK(t.dtype() == input.dtype(), op, ": expected ", name, " of dtype ",
             dtype_name(input.dtype()), " (the input's), got ", t.describe());
}

// mean / rstd handed back to the backward: M values of input's dtype beside it.
void check_stat(const Tensor& input, const Tensor& t, int64_t M, const char* name) {
  LOOM_CHECK(
      t.defined() && t.numel() == M && t.dtype() == input.dtype() && t.device() == input.device(),
      "layer_norm_backward: expected ", name, " with ", M, " values of dtype ",
      dtype_name(input.dtype()), " on ", input.device().str(), " (as layer_norm returned it), got ",
      t.describe());
}

Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? contiguous(t) : Tensor(); }

}  // namespace

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& input, const IntList& normalized_shape,
                                              const Tensor& weight, const Tensor& bias,
                                              double eps) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  // mean and rstd stay float32 (saved for the backward).
  if (input.defined() && is_reduced_float(input.dtype())) {
    auto [out, mean, rstd] =
        layer_norm(widen(input), normalized_shape, widen(weight), widen(bias), eps);
    return {round_to(out, input.dtype()), mean, rstd};
  }
  check_defined("layer_norm", input, "input");
  LOOM_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64,
             "layer_norm: expected a float32 or float64 input, got ", input.describe());
  const Rows r = rows_of("layer_norm", input, normalized_shape);
  check_affine("layer_norm", input, normalized_shape, weight, "weight");
  check_affine("layer_norm", input, normalized_shape, bias, "bias");
  check_kernel_device("layer_norm", input);

  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  IntList stat_sizes(input.sizes().begin(), input.sizes().begin() + r.axis);
  stat_sizes.resize(input.sizes().size(), 1);
  Tensor out = empty(input.sizes(), options);
  Tensor mean = empty(stat_sizes, options);
  Tensor rstd = empty(stat_sizes, options);
  layer_norm_stub(input.device(), contiguous(input), contiguous_or_undefined(weight),
                  contiguous_or_undefined(bias), r.M, r.N, eps, out, mean, rstd);
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const IntList& normalized_shape,
                                                       const Tensor& mean, const Tensor& rstd,
                                                       const Tensor& weight,
                                                       std::array<bool, 3> output_mask) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype())) {
    auto [gi, gw, gb] = layer_norm_backward(widen(grad_out), widen(input), normalized_shape,
                                            widen(mean), widen(rstd), widen(weight), output_mask);
    const DType wd = weight.defined() ? weight.dtype() : input.dtype();
    return {round_to(gi, input.dtype()), round_to(gw, wd), round_to(gb, wd)};
  }
  check_defined("layer_norm_backward", grad_out, "grad_out");
  check_defined("layer_norm_backward", input, "input");
  LOOM_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64,
             "layer_norm_backward: expected a float32 or float64 input, got ", input.describe());
  const Rows r = rows_of("layer_norm_backward", input, normalized_shape);
  LOOM_CHECK(grad_out.sizes() == input.sizes(), "layer_norm_backward: expected grad_out of shape ",
             shape_str(input.sizes()), " (the input's), got ", grad_out.describe());
  check_same_device("layer_norm_backward", input, "input", grad_out, "grad_out");
  check_affine("layer_norm_backward", input, normalized_shape, weight, "weight");
  check_stat(input, mean, r.M, "mean");
  check_stat(input, rstd, r.M, "rstd");
  check_kernel_device("layer_norm_backward", input);

  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = empty(input.sizes(), options);
  if (output_mask[1]) grad_weight = empty(normalized_shape, options);
  if (output_mask[2]) grad_bias = empty(normalized_shape, options);
  if (!output_mask[0] && !output_mask[1] && !output_mask[2]) return {};
  layer_norm_backward_stub(input.device(), contiguous(to(grad_out, input.device(), input.dtype())),
                           contiguous(input), contiguous(mean), contiguous(rstd),
                           contiguous_or_undefined(weight), r.M, r.N, grad_input, grad_weight,
                           grad_bias);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace native
}  // namespace loom
