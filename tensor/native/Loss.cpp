// Raw losses: argument checks, layout and reduction; per-element work in
// the backends (tensor/cpu/Loss.cpp; tensor/cuda/Loss.cpp and Loss.cu, where
// the totals stay on the device and the target check is deferred, so nothing
// waits for the device).
#include "tensor/native/Loss.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Index.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

DispatchStub<ClassLossKernel> class_loss_stub("class_loss");
DispatchStub<ClassLossBackwardKernel> class_loss_backward_stub("class_loss_backward");
DispatchStub<SquaredErrorKernel> squared_error_stub("mse_loss");
DispatchStub<SquaredErrorSumKernel> squared_error_sum_stub("mse_loss");
DispatchStub<SquaredErrorBackwardKernel> squared_error_backward_stub("mse_loss_backward");

namespace {

TensorOptions like(const Tensor& t, DType dtype) { return TensorOptions(dtype).device(t.device()); }

// What the gradients are divided by: the total weight for a mean (read on
// its device), nothing (1) otherwise.
Tensor grad_divisor(LossReduction reduction, const Tensor& total_weight) {
  return reduction == LossReduction::kMean ? total_weight : Tensor();
}

void check_total_weight(const char* op, const Tensor& total_weight, const Tensor& input) {
  check_defined(op, total_weight, "total_weight");
  LOOM_CHECK(total_weight.dim() == 0 && total_weight.dtype() == kFloat64, op,
             ": expected total_weight as a 0-dim float64 tensor (the forward's), got ",
             total_weight.describe());
  check_same_device(op, total_weight, "total_weight", input, "input");
}

void check_loss_grad(const char* op, const Tensor& grad, const IntList& none_shape,
                     LossReduction reduction, const Tensor& input) {
  check_defined(op, grad, "grad");
  if (reduction == LossReduction::kNone) {
    LOOM_CHECK(grad.sizes() == none_shape, op, ": expected grad of shape ", shape_str(none_shape),
               ", got ", grad.describe());
  } else {
    LOOM_CHECK(grad.numel() == 1, op, ": expected a one-element grad, got ", grad.describe());
  }
  LOOM_CHECK(grad.dtype() == input.dtype(), op, ": grad ", grad.describe(),
             " does not match the input's dtype ", dtype_name(input.dtype()));
  check_same_device(op, grad, "grad", input, "input");
}

Tensor contiguous_or_none(const Tensor& t) { return t.defined() ? contiguous(t) : Tensor(); }

// A class loss: (loss, logsumexp (cross_entropy only), total_weight), every
// value computed on the input's device.
std::tuple<Tensor, Tensor, Tensor> class_loss(bool cross_entropy, const ClassLossShape& s,
                                                   const Tensor& input, const Tensor& target,
                                                   const Tensor& weight, LossReduction reduction,
                                                   int64_t ignore_index, double label_smoothing) {
  Tensor per = empty({s.N * s.S}, like(input, input.dtype()));
  Tensor lse = cross_entropy ? empty(s.none_shape, like(input, kFloat64)) : Tensor();
  Tensor out = reduction == LossReduction::kNone ? Tensor() : empty({}, like(input, input.dtype()));
  Tensor total_weight = empty({}, like(input, kFloat64));
  class_loss_stub(input.device(), cross_entropy, per, lse, out, total_weight, contiguous(input),
                  contiguous(target), contiguous_or_none(weight), s.N, s.C, s.S, ignore_index,
                  label_smoothing, reduction == LossReduction::kMean);
  return {reduction == LossReduction::kNone ? view(per, s.none_shape) : out, lse, total_weight};
}

}  // namespace

ClassLossShape check_class_loss(const char* op, const Tensor& input, const Tensor& target,
                                const Tensor& weight, int64_t ignore_index) {
  check_defined(op, input, "input");
  check_defined(op, target, "target");
  LOOM_CHECK(input.is_floating_point(), op,
             ": expected a floating-point input (float32 or float64), got ", input.describe());
  LOOM_CHECK(input.dim() >= 1, op, ": expected input of shape (N, C) or (N, C, d1, ...), got ",
             input.describe());
  LOOM_CHECK(target.dtype() == kInt64, op, ": expected target of dtype int64 (class indices), got ",
             target.describe());
  check_same_device(op, input, "input", target, "target");
  ClassLossShape s;
  if (input.dim() == 1) {
    s.C = input.sizes()[0];
  } else {
    s.N = input.sizes()[0];
    s.C = input.sizes()[1];
    s.none_shape.push_back(s.N);
    for (int64_t d = 2; d < input.dim(); ++d) {
      s.S *= input.sizes()[d];
      s.none_shape.push_back(input.sizes()[d]);
    }
  }
  LOOM_CHECK(target.sizes() == s.none_shape, op, ": expected target of shape ",
             shape_str(s.none_shape), " for input of shape ", shape_str(input.sizes()),
             ", got target ", target.describe());
  if (weight.defined()) {
    LOOM_CHECK(weight.dim() == 1 && weight.numel() == s.C, op,
               ": expected weight of shape [C] = [", s.C, "], got ", weight.describe());
    LOOM_CHECK(weight.dtype() == input.dtype(), op, ": expected weight of dtype ",
               dtype_name(input.dtype()), " like the input, got ", weight.describe());
    check_same_device(op, input, "input", weight, "weight");
  }
  check_kernel_device(op, input);
  const int64_t C = s.C;
  check_index_values(contiguous(target), C, true, ignore_index, [op, C, ignore_index](int64_t bad) {
    return detail::str(op, ": Target ", bad, " is out of bounds: expected a class index in [0, ", C,
                       ") (C = ", C, ") or ignore_index ", ignore_index);
  });
  return s;
}

std::tuple<Tensor, Tensor> nll_loss(const Tensor& input, const Tensor& target,
                                    const Tensor& weight, LossReduction reduction,
                                    int64_t ignore_index) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype())) {
    auto [loss, total_weight] = nll_loss(widen(input), target, widen(weight), reduction,
                                         ignore_index);
    return {round_to(loss, input.dtype()), total_weight};
  }
  const ClassLossShape s = check_class_loss("nll_loss", input, target, weight, ignore_index);
  auto [loss, lse, total_weight] =
      class_loss(false, s, input, target, weight, reduction, ignore_index, 0.0);
  return {loss, total_weight};
}

Tensor nll_loss_backward(const Tensor& grad, const Tensor& input, const Tensor& target,
                         const Tensor& weight, LossReduction reduction, int64_t ignore_index,
                         const Tensor& total_weight) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype()))
    return round_to(nll_loss_backward(widen(grad), widen(input), target, widen(weight), reduction,
                                      ignore_index, total_weight),
                    input.dtype());
  const ClassLossShape s = check_class_loss("nll_loss_backward", input, target, weight,
                                            ignore_index);
  check_loss_grad("nll_loss_backward", grad, s.none_shape, reduction, input);
  check_total_weight("nll_loss_backward", total_weight, input);
  Tensor grad_input = zeros(input.sizes(), like(input, input.dtype()));
  class_loss_backward_stub(input.device(), false, grad_input, contiguous(grad),
                           grad_divisor(reduction, total_weight), contiguous(input), Tensor(),
                           contiguous(target), contiguous_or_none(weight), s.N, s.C, s.S,
                           ignore_index, 0.0);
  return grad_input;
}

std::tuple<Tensor, Tensor, Tensor> cross_entropy(const Tensor& input, const Tensor& target,
                                                 const Tensor& weight, LossReduction reduction,
                                                 int64_t ignore_index, double label_smoothing) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype())) {
    auto [loss, logsumexp, total_weight] = cross_entropy(widen(input), target, widen(weight),
                                                         reduction, ignore_index, label_smoothing);
    return {round_to(loss, input.dtype()), logsumexp, total_weight};
  }
  LOOM_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
             "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);
  const ClassLossShape s = check_class_loss("cross_entropy", input, target, weight, ignore_index);
  return class_loss(true, s, input, target, weight, reduction, ignore_index, label_smoothing);
}

Tensor cross_entropy_backward(const Tensor& grad, const Tensor& input, const Tensor& target,
                              const Tensor& weight, const Tensor& logsumexp,
                              LossReduction reduction, int64_t ignore_index,
                              double label_smoothing, const Tensor& total_weight) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype()))
    return round_to(cross_entropy_backward(widen(grad), widen(input), target, widen(weight),
                                           logsumexp, reduction, ignore_index, label_smoothing,
                                           total_weight),
                    input.dtype());
  const ClassLossShape s = check_class_loss("cross_entropy_backward", input, target, weight,
                                            ignore_index);
  check_loss_grad("cross_entropy_backward", grad, s.none_shape, reduction, input);
  check_total_weight("cross_entropy_backward", total_weight, input);
  LOOM_CHECK(logsumexp.sizes() == s.none_shape && logsumexp.dtype() == kFloat64,
             "cross_entropy_backward: logsumexp ", logsumexp.describe(), " does not match input ",
             input.describe());
  Tensor grad_input = empty(input.sizes(), like(input, input.dtype()));
  class_loss_backward_stub(input.device(), true, grad_input, contiguous(grad),
                           grad_divisor(reduction, total_weight), contiguous(input),
                           contiguous(logsumexp), contiguous(target), contiguous_or_none(weight),
                           s.N, s.C, s.S, ignore_index, label_smoothing);
  return grad_input;
}

namespace {

// input and target broadcast to one shape, contiguous.
std::tuple<Tensor, Tensor> mse_operands(const char* op, const Tensor& input,
                                        const Tensor& target) {
  check_defined(op, input, "input");
  check_defined(op, target, "target");
  LOOM_CHECK(input.is_floating_point() && input.dtype() == target.dtype(), op,
             ": expected input and target of one floating dtype, got input ", input.describe(),
             " and target ", target.describe());
  check_same_device(op, input, "input", target, "target");
  check_kernel_device(op, input);
  const IntList shape = broadcast_shapes(input.sizes(), target.sizes(), op);
  return {contiguous(expand(input, shape)), contiguous(expand(target, shape))};
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, LossReduction reduction) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && target.defined() && is_reduced_float(input.dtype()) &&
      input.dtype() == target.dtype())
    return round_to(mse_loss(widen(input), widen(target), reduction), input.dtype());
  const auto [x, y] = mse_operands("mse_loss", input, target);
  if (reduction == LossReduction::kNone) {
    Tensor out = empty(x.sizes(), like(x, x.dtype()));
    squared_error_stub(x.device(), out, x, y);
    return out;
  }
  Tensor out = empty({}, like(x, x.dtype()));
  squared_error_sum_stub(
                         x.device(), out, x, y,
                         reduction == LossReduction::kMean ? static_cast<double>(x.numel()) : 1.0);
  return out;
}

Tensor mse_loss_backward(const Tensor& grad, const Tensor& input, const Tensor& target,
                         LossReduction reduction) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype()))
    return round_to(mse_loss_backward(widen(grad), widen(input), widen(target), reduction),
                    input.dtype());
  const auto [x, y] = mse_operands("mse_loss_backward", input, target);
  check_loss_grad("mse_loss_backward", grad, x.sizes(), reduction, x);
  Tensor grad_input = empty(x.sizes(), like(x, x.dtype()));
  const double scale =
      reduction == LossReduction::kMean ? 1.0 / static_cast<double>(x.numel()) : 1.0;
  squared_error_backward_stub(x.device(), grad_input, contiguous(grad), scale, x, y);
  return grad_input;
}

}  // namespace native
}  // namespace loom
