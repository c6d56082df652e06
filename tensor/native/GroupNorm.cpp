#include "tensor/native/GroupNorm.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace native {

DispatchStub<GroupNormKernel> group_norm_stub("group_norm");
DispatchStub<GroupNormBackwardKernel> group_norm_backward_stub("group_norm_backward");

namespace {

struct Groups {
  int64_t N = 0, C = 0, HxW = 1;
};

// Checks input's rank and num_groups against its channels (PyTorch's messages).
Groups groups_of(const char* op, const Tensor& input, int64_t num_groups) {
  LOOM_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64, op,
             ": expected a float32 or float64 input, got ", input.describe());
  LOOM_CHECK(input.dim() >= 2, op,
             ": expected an input of shape (N, C, *) with at least 2 dimensions, got ",
             input.describe());
  LOOM_CHECK(num_groups > 0, op, ": num_groups must be positive, got ", num_groups);
  Groups g;
  g.N = input.size(0);
  g.C = input.size(1);
  for (int64_t d = 2; d < input.dim(); ++d) g.HxW *= input.size(d);
  LOOM_CHECK(g.C % num_groups == 0, op,
             ": expected number of channels in input to be divisible by num_groups, but got "
             "input of shape ",
             shape_str(input.sizes()), " and num_groups=", num_groups);
  return g;
}

// weight / bias: undefined, or C values of input's dtype on its device.
void check_affine(const char* op, const Tensor& input, const Tensor& t, const char* name) {
  if (!t.defined()) return;
  LOOM_CHECK(t.dim() == 1 && t.numel() == input.size(1), op, ": expected ", name,
             " to be a vector of size equal to the number of channels in input, but got ", name,
             " of shape ", shape_str(t.sizes()), " and input of shape ", shape_str(input.sizes()));
  check_same_device(op, input, "input", t, name);
  LOOM_CHECK(t.dtype() == input.dtype(), op, ": expected ", name, " of dtype ",
             dtype_name(input.dtype()), " (the input's), got ", t.describe());
}

// mean / rstd handed back to the backward: (N, G) of input's dtype beside it.
void check_stat(const Tensor& input, const Tensor& t, int64_t count, const char* name) {
  LOOM_CHECK(t.defined() && t.numel() == count && t.dtype() == input.dtype() &&
                 t.device() == input.device(),
             "group_norm_backward: expected ", name, " with ", count,
             " values (N * num_groups) of dtype ", dtype_name(input.dtype()), " on ",
             input.device().str(), " (as group_norm returned it), got ", t.describe());
}

Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? contiguous(t) : Tensor(); }

}  // namespace

std::tuple<Tensor, Tensor, Tensor> group_norm(const Tensor& input, int64_t num_groups,
                                              const Tensor& weight, const Tensor& bias,
                                              double eps) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype())) {
    auto [out, mean, rstd] = group_norm(widen(input), num_groups, widen(weight), widen(bias), eps);
    return {round_to(out, input.dtype()), mean, rstd};
  }
  check_defined("group_norm", input, "input");
  const Groups g = groups_of("group_norm", input, num_groups);
  check_affine("group_norm", input, weight, "weight");
  check_affine("group_norm", input, bias, "bias");
  check_kernel_device("group_norm", input);

  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  Tensor out = empty(input.sizes(), options);
  Tensor mean = empty({g.N, num_groups}, options);
  Tensor rstd = empty({g.N, num_groups}, options);
  group_norm_stub(input.device(), contiguous(input), contiguous_or_undefined(weight),
                  contiguous_or_undefined(bias), g.N, g.C, g.HxW, num_groups, eps, out, mean, rstd);
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> group_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& mean, const Tensor& rstd,
                                                       const Tensor& weight, int64_t num_groups,
                                                       std::array<bool, 3> output_mask) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype())) {
    auto [gi, gw, gb] = group_norm_backward(widen(grad_out), widen(input), widen(mean),
                                            widen(rstd), widen(weight), num_groups, output_mask);
    const DType wd = weight.defined() ? weight.dtype() : input.dtype();
    return {round_to(gi, input.dtype()), round_to(gw, wd), round_to(gb, wd)};
  }
  check_defined("group_norm_backward", grad_out, "grad_out");
  check_defined("group_norm_backward", input, "input");
  const Groups g = groups_of("group_norm_backward", input, num_groups);
  LOOM_CHECK(grad_out.sizes() == input.sizes(), "group_norm_backward: expected grad_out of shape ",
             shape_str(input.sizes()), " (the input's), got ", grad_out.describe());
  check_same_device("group_norm_backward", input, "input", grad_out, "grad_out");
  check_affine("group_norm_backward", input, weight, "weight");
  check_stat(input, mean, g.N * num_groups, "mean");
  check_stat(input, rstd, g.N * num_groups, "rstd");
  check_kernel_device("group_norm_backward", input);

  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = empty(input.sizes(), options);
  if (output_mask[1]) grad_weight = empty({g.C}, options);
  if (output_mask[2]) grad_bias = empty({g.C}, options);
  if (!output_mask[0] && !output_mask[1] && !output_mask[2]) return {};
  group_norm_backward_stub(input.device(), contiguous(to(grad_out, input.device(), input.dtype())),
                           contiguous(input), contiguous(mean), contiguous(rstd),
                           contiguous_or_undefined(weight), g.N, g.C, g.HxW, num_groups, grad_input,
                           grad_weight, grad_bias);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace native
}  // namespace loom
