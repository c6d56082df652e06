#include "tensor/native/Unary.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace native {

DispatchStub<UnaryKernel> unary_stub("unary");
DispatchStub<UnaryBackwardKernel> unary_backward_stub("unary_backward");
DispatchStub<PowScalarKernel> pow_scalar_stub("pow");
DispatchStub<ClampKernel> clamp_stub("clamp");
DispatchStub<PowBackwardKernel> pow_backward_stub("pow_backward");
DispatchStub<ClampBackwardKernel> clamp_backward_stub("clamp_backward");

const char* unary_op_name(UnaryOp op) {
  const char* name = "unary";
  visit_unary_op(op, [&](auto tag) { name = decltype(tag)::type::name; });
  return name;
}

DType unary_result_dtype(UnaryOp op, DType dtype) {
  optable::UnaryDType rule = optable::UnaryDType::kKeep;
  visit_unary_op(op, [&](auto tag) { rule = decltype(tag)::type::dtype; });
  const char* name = unary_op_name(op);
  switch (rule) {
    case optable::UnaryDType::kKeep:
      return dtype;
    case optable::UnaryDType::kKeepNoBool:
      if (op == unary_op<optable::Neg>())
        LOOM_CHECK(dtype != kBool, "neg: negation, the `-` operator, on a bool tensor is not "
                   "supported; use logical_not or convert with .to(kInt64) first");
      LOOM_CHECK(dtype != kBool, name, ": not supported for bool tensors; "
                 "convert with .to(kInt64) first");
      return dtype;
    case optable::UnaryDType::kToFloat:
      // Transcendental ops compute integers as the default float dtype.
      return is_floating_point(dtype) ? dtype : kFloat32;
    case optable::UnaryDType::kFloatOnly:
      LOOM_CHECK(is_floating_point(dtype), name, ": expected a floating-point tensor (float32 or "
                 "float64), got ", dtype_name(dtype), "; convert with .to(kFloat32) first");
      return dtype;
  }
  return dtype;
}

namespace {

void check_device(const char* name, const Tensor& t) {
  check_kernel_device(name, t);
}

// The (first) dtype `self op bound` promotes to, PyTorch-style: a fractional
// scalar makes an integer tensor float32.
DType scalar_result_dtype(DType self, std::initializer_list<std::optional<Scalar>> scalars) {
  if (is_floating_point(self)) return self;
  for (const auto& s : scalars)
    if (s && !s->is_integral()) return kFloat32;
  return self;
}

}  // namespace

Tensor unary(UnaryOp op, const Tensor& self, const UnaryArgs& args) {
  const char* name = unary_op_name(op);
  check_defined(name, self, "self");
  const DType dtype = unary_result_dtype(op, self.dtype());
  check_device(name, self);
  const DType compute = elementwise_dtype(self.device(), dtype);
  Tensor out =
      empty_keeping_layout(self.sizes(), TensorOptions(compute).device(self.device()), self);
  const Tensor in = to(self, self.device(), compute);
  unary_stub(out.device(), op, args, out, in);
  return to(out, out.device(), dtype);
}

void unary_(UnaryOp op, const Tensor& self, const UnaryArgs& args) {
  const char* name = unary_op_name(op);
  check_defined(name, self, "self");
  const DType dtype = unary_result_dtype(op, self.dtype());
  LOOM_CHECK(dtype == self.dtype(), name, "_: result type ", dtype_name(dtype),
             " can't be cast to the desired output type ", dtype_name(self.dtype()), " of ",
             self.describe(), "; use the out-of-place ", name, "()");
  check_device(name, self);
  if (elementwise_takes(self.device(), dtype)) {
    unary_stub(self.device(), op, args, self, self);
  } else {
    in_compute_dtype(self, [&](const Tensor& t) { unary_stub(t.device(), op, args, t, t); });
  }
  self.bump_version();
}

Tensor pow(const Tensor& self, Scalar exponent) {
  check_defined("pow", self, "self");
  DType dtype = scalar_result_dtype(self.dtype(), {exponent});
  if (dtype == kBool) dtype = kInt64;  // True ** 2 counts as an integer
  LOOM_CHECK(is_floating_point(dtype) || exponent.to_double() >= 0,
             "pow: integers to negative integer powers are not allowed (self ",
             self.describe(), ", exponent ", exponent.to_int(),
             "); convert self with .to(kFloat32) first");
  check_device("pow", self);
  const DType compute = compute_dtype(dtype);
  Tensor out = empty(self.sizes(), TensorOptions(compute).device(self.device()));
  const Tensor in = to(self, self.device(), compute);
  pow_scalar_stub(out.device(), out, in, exponent);
  return to(out, out.device(), dtype);
}

namespace {
void check_clamp_args(const char* name, const Tensor& self, const std::optional<Scalar>& min,
                      const std::optional<Scalar>& max) {
  check_defined(name, self, "self");
  LOOM_CHECK(min || max, name, ": at least one of 'min' or 'max' must be given");
  LOOM_CHECK(self.dtype() != kBool, name, ": not supported for bool tensors, got ",
             self.describe());
  check_device(name, self);
}
}  // namespace

Tensor clamp(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max) {
  check_clamp_args("clamp", self, min, max);
  const DType dtype = scalar_result_dtype(self.dtype(), {min, max});
  const DType compute = compute_dtype(dtype);
  Tensor out = empty(self.sizes(), TensorOptions(compute).device(self.device()));
  const Tensor in = to(self, self.device(), compute);
  clamp_stub(out.device(), out, in, min, max);
  return to(out, out.device(), dtype);
}

void clamp_(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max) {
  check_clamp_args("clamp_", self, min, max);
  const DType dtype = scalar_result_dtype(self.dtype(), {min, max});
  LOOM_CHECK(dtype == self.dtype(), "clamp_: result type ", dtype_name(dtype),
             " (a fractional bound) can't be cast to the desired output type ",
             dtype_name(self.dtype()), " of ", self.describe());
  in_compute_dtype(self, [&](const Tensor& t) { clamp_stub(t.device(), t, t, min, max); });
  self.bump_version();
}

// ---- backward kernels -----------------------------------------------------------

namespace {
// grad converted to saved's dtype, after checking both agree in shape and device.
Tensor grad_like(const char* name, const Tensor& grad, const Tensor& saved) {
  check_defined(name, grad, "grad");
  check_defined(name, saved, "saved");
  LOOM_CHECK(grad.sizes() == saved.sizes(), name, ": grad ", shape_str(grad.sizes()),
             " and saved tensor ", shape_str(saved.sizes()), " differ in shape");
  check_same_device(name, grad, "grad", saved, "saved");
  LOOM_CHECK(is_floating_point(saved.dtype()), name, ": expected a floating saved tensor, got ",
             saved.describe());
  check_device(name, saved);
  return to(grad, grad.device(), saved.dtype());
}

// A gradient laid out as the saved tensor (channels last stays so).
Tensor empty_like_saved(const Tensor& t) {
  return empty_keeping_layout(t.sizes(), TensorOptions(t.dtype()).device(t.device()), t);
}
}  // namespace

// Backward kernels of 16-bit floats compute in float32 and round once
// (unary_backward on the 16-bit tensors where the device's kernels take them).
Tensor unary_backward(UnaryOp op, const Tensor& grad, const Tensor& saved,
                      const UnaryArgs& args) {
  const Tensor g = grad_like("unary_backward", grad, saved);
  const Tensor s = to(saved, saved.device(), elementwise_dtype(saved.device(), saved.dtype()));
  Tensor out = empty_like_saved(s);
  unary_backward_stub(out.device(), op, args, out, to(g, g.device(), s.dtype()), s);
  return to(out, out.device(), saved.dtype());
}

Tensor pow_backward(const Tensor& grad, const Tensor& self, double exponent) {
  const Tensor g = grad_like("pow_backward", grad, self);
  const Tensor s = to(self, self.device(), compute_dtype(self.dtype()));
  Tensor out = empty_like_saved(s);
  pow_backward_stub(out.device(), out, to(g, g.device(), s.dtype()), s, exponent);
  return to(out, out.device(), self.dtype());
}

Tensor clamp_backward(const Tensor& grad, const Tensor& self, std::optional<Scalar> min,
                      std::optional<Scalar> max) {
  const Tensor g = grad_like("clamp_backward", grad, self);
  const Tensor s = to(self, self.device(), compute_dtype(self.dtype()));
  Tensor out = empty_like_saved(s);
  clamp_backward_stub(out.device(), out, to(g, g.device(), s.dtype()), s, min, max);
  return to(out, out.device(), self.dtype());
}

}  // namespace native
}  // namespace loom
