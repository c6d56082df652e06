#include "tensor/native/Normalization.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Unary.h"

namespace loom {
namespace native {

DispatchStub<BatchNormKernel> batch_norm_stub("batch_norm");
DispatchStub<BatchNormBackwardKernel> batch_norm_backward_stub("batch_norm_backward");
DispatchStub<BatchNormTakesKernel> batch_norm_takes_stub("batch_norm_takes");
DispatchStub<BatchNormChannelsLastKernel> batch_norm_channels_last_stub(
    "batch_norm_channels_last");
DispatchStub<BatchNormFusesReluKernel> batch_norm_fuses_relu_stub("batch_norm_fuses_relu");

namespace {

BatchNormShape bn_shape(const Tensor& input) {
  BatchNormShape s;
  s.batch = input.size(0);
  s.channels = input.size(1);
  s.spatial = 1;
  for (int64_t d = 2; d < input.dim(); ++d) s.spatial *= input.size(d);
  s.channels_last = input.suggest_memory_format() == MemoryFormat::kChannelsLast &&
                    batch_norm_channels_last_stub.answer_or(false, input.device(), input.dtype());
  return s;
}

// Whether the device's kernels take input's 16-bit dtype as it is (the CPU's
// take bfloat16, CUDA's float16 and bfloat16: activations in 16 bits,
// arithmetic and statistics in float32).
bool takes_reduced(const Tensor& input) {
  return is_reduced_float(input.dtype()) &&
         batch_norm_takes_stub.answer_or(false, input.device(), input.dtype());
}

// A per-channel parameter or statistic: undefined, or C values of
// batch_norm_stats_dtype(input.dtype()).
void check_channel_tensor(const Tensor& input, const Tensor& t, const char* name) {
  if (!t.defined()) return;
  check_same_device("batch_norm", input, "input", t, name);
  const int64_t C = input.size(1);
  LOOM_CHECK(t.numel() == C && t.dim() <= 1, "batch_norm: expected ", name, " of shape [", C,
             "] for input ", shape_str(input.sizes()), " (C = ", C, " channels), got ",
             shape_str(t.sizes()));
  const DType stats = batch_norm_stats_dtype(input.dtype());
  LOOM_CHECK(t.dtype() == stats, "batch_norm: expected ", name, " of dtype ", dtype_name(stats),
             ", got ", t.describe());
}

// Whether the device's kernels fuse the ReLU (and the residual add) for
// input, in the dtype they run it in.
bool fuses_relu(const Tensor& input) {
  return (!is_reduced_float(input.dtype()) || takes_reduced(input)) &&
         batch_norm_fuses_relu_stub.answer_or(false, input.device(), input.dtype());
}

// batch_norm on an input the kernels take as it is (float32, float64;
// bfloat16 on the CPU with float32 parameters); residual defined only where
// the kernels fuse it (input's shape, dtype and device).
std::tuple<Tensor, Tensor, Tensor> batch_norm_checked(const Tensor& input,
                                                      const Tensor& running_mean,
                                                      const Tensor& running_var,
                                                      const Tensor& weight, const Tensor& bias,
                                                      bool training, double momentum,
                                                      double eps, bool relu,
                                                      const Tensor& residual) {
  check_defined("batch_norm", input, "input");
  LOOM_CHECK(input.dim() >= 2,
             "batch_norm: expected input of shape (N, C, ...) with at least 2 dims, got ",
             input.describe());
  LOOM_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64 || takes_reduced(input),
             "batch_norm: expected a float32 or float64 input, got ", input.describe());
  check_kernel_device("batch_norm", input);
  check_channel_tensor(input, weight, "weight");
  check_channel_tensor(input, bias, "bias");
  check_channel_tensor(input, running_mean, "running_mean");
  check_channel_tensor(input, running_var, "running_var");
  LOOM_CHECK(running_mean.defined() == running_var.defined(),
             "batch_norm: running_mean and running_var must both be given or both be undefined");
  LOOM_CHECK(training || running_mean.defined(),
             "batch_norm: running_mean and running_var must be defined in evaluation mode");
  BatchNormShape s = bn_shape(input);
  s.relu = relu && fuses_relu(input);
  s.residual = residual.defined();
  const int64_t count = s.batch * s.spatial;
  LOOM_CHECK(!training || count > 1,
             "batch_norm: Expected more than 1 value per channel when training, got input size ",
             shape_str(input.sizes()));
  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  const TensorOptions stats =
      TensorOptions(batch_norm_stats_dtype(input.dtype())).device(input.device());
  const MemoryFormat format = channels_last_if(s.channels_last);
  const Tensor x = contiguous(input, format);
  Tensor out = empty(input.sizes(), options, format);
  Tensor save_mean = empty({s.channels}, stats);
  Tensor save_invstd = empty({s.channels}, stats);
  const Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  const Tensor b = bias.defined() ? contiguous(bias) : Tensor();
  const Tensor r = s.residual ? contiguous(residual, format) : Tensor();
  batch_norm_stub(input.device(), s, x, r, w, b, running_mean, running_var, training, momentum,
                  eps, out, save_mean, save_invstd);
  if (relu && !s.relu) unary_(unary_op<optable::Relu>(), out, {});
  return {out, save_mean, save_invstd};
}

// batch_norm_backward on operands the kernels take as they are; relu_output
// defined only where the kernels fuse the ReLU's mask.
void batch_norm_backward_checked(const Tensor& grad_output, const Tensor& input,
                                 const Tensor& weight, const Tensor& save_mean,
                                 const Tensor& save_invstd, bool training, bool need_input,
                                 bool need_weight, bool need_bias, Tensor& grad_input,
                                 Tensor& grad_weight, Tensor& grad_bias,
                                 const Tensor& relu_output) {
  LOOM_CHECK(grad_output.sizes() == input.sizes(),
             "batch_norm_backward: expected grad_output of shape ", shape_str(input.sizes()),
             ", got ", grad_output.describe());
  BatchNormShape s = bn_shape(input);
  s.relu = relu_output.defined();
  if (s.relu)
    LOOM_CHECK(relu_output.sizes() == input.sizes() && relu_output.dtype() == input.dtype(),
               "batch_norm_backward: expected relu_output like input ", input.describe(),
               ", got ", relu_output.describe());
  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  const TensorOptions stats =
      TensorOptions(batch_norm_stats_dtype(input.dtype())).device(input.device());
  const MemoryFormat format = channels_last_if(s.channels_last);
  const Tensor go = contiguous(to(grad_output, input.device(), input.dtype()), format);
  const Tensor x = contiguous(input, format);
  const Tensor y = s.relu ? contiguous(relu_output, format) : Tensor();
  const Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  if (need_input) grad_input = empty(input.sizes(), options, format);
  if (need_weight) grad_weight = empty({s.channels}, stats);
  if (need_bias) grad_bias = empty({s.channels}, stats);
  if (!need_input && !need_weight && !need_bias) return;
  batch_norm_backward_stub(input.device(), s, go, y, x, w, contiguous(save_mean),
                           contiguous(save_invstd), training, need_input ? grad_input : Tensor(),
                           need_weight ? grad_weight : Tensor(), need_bias ? grad_bias : Tensor());
}

}  // namespace

DType batch_norm_stats_dtype(DType input) {
  return is_reduced_float(input) ? kFloat32 : input;
}

std::tuple<Tensor, Tensor, Tensor> batch_norm(const Tensor& input, const Tensor& running_mean,
                                              const Tensor& running_var, const Tensor& weight,
                                              const Tensor& bias, bool training, double momentum,
                                              double eps, bool relu, const Tensor& residual) {
  if (residual.defined()) {
    check_defined("batch_norm", input, "input");
    LOOM_CHECK(residual.sizes() == input.sizes(), "batch_norm: expected a residual of shape ",
               shape_str(input.sizes()), " (the input's), got ", residual.describe());
    check_same_device("batch_norm", input, "input", residual, "residual");
    // Where the kernels cannot add it in their pass: batch norm, then the
    // add (promoting as `+`) and the ReLU.
    if (residual.dtype() != input.dtype() || !fuses_relu(input)) {
      auto [out, save_mean, save_invstd] = batch_norm(input, running_mean, running_var, weight,
                                                      bias, training, momentum, eps, false);
      out = binary(binary_op<optable::Add>(), out, residual);
      if (relu) unary_(unary_op<optable::Relu>(), out, {});
      return {out, save_mean, save_invstd};
    }
  }
  // float16/bfloat16: the parameters and running statistics may be float32
  // beside a 16-bit input (as PyTorch allows); 16-bit running statistics are
  // updated through a float32 copy.  save_mean and save_invstd are float32.
  // Where the device's kernels take the dtype (bfloat16 on the CPU, both on
  // CUDA) it runs as it is (the kernels widen in registers); otherwise
  // computed in float32 and rounded once.
  if (input.defined() && is_reduced_float(input.dtype())) {
    const Tensor rm = widen(running_mean), rv = widen(running_var);
    auto [out, save_mean, save_invstd] =
        batch_norm_checked(takes_reduced(input) ? input : widen(input), rm, rv, widen(weight),
                           widen(bias), training, momentum, eps, relu, residual);
    if (training && rm.defined() && !rm.is_same(running_mean)) copy_(running_mean, rm);
    if (training && rv.defined() && !rv.is_same(running_var)) copy_(running_var, rv);
    return {round_to(out, input.dtype()), save_mean, save_invstd};
  }
  return batch_norm_checked(input, running_mean, running_var, weight, bias, training, momentum,
                            eps, relu, residual);
}

void batch_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training,
                         bool need_input, bool need_weight, bool need_bias, Tensor& grad_input,
                         Tensor& grad_weight, Tensor& grad_bias, const Tensor& relu_output) {
  // The ReLU's mask goes into the kernels where they fuse it for the dtype
  // they run in; otherwise it is applied to grad_output first (the same
  // values: masking only zeroes some).
  const bool fused = relu_output.defined() && input.defined() &&
                     relu_output.dtype() == input.dtype() && fuses_relu(input);
  const Tensor go = relu_output.defined() && !fused
                        ? unary_backward(unary_op<optable::Relu>(), grad_output, relu_output, {})
                        : grad_output;
  const Tensor y = fused ? relu_output : Tensor();
  // float16/bfloat16 as in batch_norm: as it is where the device's kernels
  // take it (the parameter gradients in float32), otherwise computed in
  // float32; then each gradient in its tensor's dtype.
  if (input.defined() && is_reduced_float(input.dtype())) {
    const bool as_is = takes_reduced(input);
    batch_norm_backward_checked(as_is ? go : widen(go), as_is ? input : widen(input),
                                widen(weight), widen(save_mean), widen(save_invstd), training,
                                need_input, need_weight, need_bias, grad_input, grad_weight,
                                grad_bias, y);
    const DType wd = weight.defined() ? weight.dtype() : input.dtype();
    grad_input = round_to(grad_input, input.dtype());
    grad_weight = round_to(grad_weight, wd);
    grad_bias = round_to(grad_bias, wd);
    return;
  }
  batch_norm_backward_checked(go, input, weight, save_mean, save_invstd, training, need_input,
                              need_weight, need_bias, grad_input, grad_weight, grad_bias, y);
}

}  // namespace native
}  // namespace loom
