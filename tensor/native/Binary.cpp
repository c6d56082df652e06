#include "tensor/native/Binary.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

DispatchStub<BinaryKernel> binary_stub("binary");
DispatchStub<IscloseKernel> isclose_stub("isclose");

namespace {
optable::BinaryDType rule_of(BinaryOp op) {
  optable::BinaryDType rule = optable::BinaryDType::kPromote;
  visit_binary_op(op, [&](auto tag) { rule = decltype(tag)::type::dtype; });
  return rule;
}
}  // namespace

const char* binary_op_name(BinaryOp op) {
  const char* name = "binary";
  visit_binary_op(op, [&](auto tag) { name = decltype(tag)::type::name; });
  return name;
}

bool is_comparison(BinaryOp op) { return rule_of(op) == optable::BinaryDType::kCompare; }

DType promoted_dtype(const Tensor& a, const Tensor& b) {
  const bool a_scalar = a.dim() == 0, b_scalar = b.dim() == 0;
  if (a_scalar != b_scalar) {
    const Tensor& full = a_scalar ? b : a;
    const Tensor& scalar = a_scalar ? a : b;
    // A 0-dim operand only matters when it is of a higher category.
    const bool full_float = is_floating_point(full.dtype());
    const bool scalar_float = is_floating_point(scalar.dtype());
    if (full_float || !scalar_float) {
      if (full.dtype() == kBool && scalar.dtype() != kBool) return scalar.dtype();
      return full.dtype();
    }
    // A 0-dim floating tensor beside integers gives its own dtype
    // (PyTorch: arange(3) + tensor(2., dtype=float64) is float64); a wrapped
    // fractional scalar is float32 already (wrap_scalar).
    return scalar.dtype();
  }
  return promote_types(a.dtype(), b.dtype());
}

namespace {
// bool < integer < floating.
int dtype_category(DType d) { return d == kBool ? 0 : (is_floating_point(d) ? 2 : 1); }

// Bool tensors only support comparisons and the logical mul/maximum/minimum.
void check_bool_arithmetic(BinaryOp op, DType compute, const Tensor& a, const Tensor& b) {
  const optable::BinaryDType rule = rule_of(op);
  LOOM_CHECK(compute != kBool || rule == optable::BinaryDType::kCompare ||
                 rule == optable::BinaryDType::kLogicalBool,
             binary_op_name(op), ": not supported for bool tensors (got ", a.describe(), " and ",
             b.describe(), "); convert with .to(kInt64) first");
}
}  // namespace

DType result_dtype(BinaryOp op, const Tensor& a, const Tensor& b) {
  if (is_comparison(op)) return kBool;
  const DType d = promoted_dtype(a, b);
  if (rule_of(op) == optable::BinaryDType::kToFloat && !is_floating_point(d)) return kFloat32;
  return d;
}

Tensor expand_to(const Tensor& t, const IntList& shape) {
  return t.sizes() == shape ? t : expand(t, shape);
}

namespace {
// The dtype of a wrapped scalar `value` beside `like`.
DType scalar_dtype(Scalar value, const Tensor& like) {
  DType d = like.dtype();
  if (!value.is_integral() && !is_floating_point(d)) d = kFloat32;
  if (value.is_integral() && d == kBool) d = kInt64;
  // A scalar beside a 16-bit float stays float32 (the kernel's compute
  // type), as PyTorch reads it: `x * 0.1` multiplies by float(0.1), not by
  // 0.1 rounded to float16.  Promotion still gives x's dtype.
  if (is_reduced_float(d)) d = kFloat32;
  return d;
}

// A 0-dim tensor of dtype d holding value on CPU device `device`, written
// directly: this runs once per `t * 2`, so it skips fill_'s loop.
Tensor cpu_scalar(Scalar value, DType d, Device device) {
  Tensor t = empty({}, TensorOptions(d).device(device));
  dispatch_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    *static_cast<T*>(t.data_ptr()) = static_cast<T>(value.to_double());
  });
  return t;
}

// The device a binary op of a and b runs on: theirs, or b's when a is a CPU
// scalar beside a tensor of another device.
Device binary_device(const Tensor& a, const Tensor& b) {
  return is_cpu_scalar(a) && a.device() != b.device() ? b.device() : a.device();
}

// Same device, or a CPU scalar beside anything.
void check_binary_devices(const char* name, const Tensor& a, const char* a_name, const Tensor& b,
                          const char* b_name) {
  if (a.device() == b.device() || is_cpu_scalar(a) || is_cpu_scalar(b)) return;
  check_same_device(name, a, a_name, b, b_name);
}
}  // namespace

bool is_cpu_scalar(const Tensor& t) { return t.is_cpu() && t.dim() == 0; }

Tensor wrap_scalar(Scalar value, const Tensor& like) {
  const DType d = scalar_dtype(value, like);
  if (!like.is_cpu()) return scalar_tensor(value, TensorOptions(d).device(like.device()));
  return cpu_scalar(value, d, like.device());
}

Tensor scalar_operand(Scalar value, const Tensor& like) {
  // Beside a CPU tensor, on its (logical) CPU device, as before.
  return cpu_scalar(value, scalar_dtype(value, like), like.is_cpu() ? like.device() : Device());
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha) {
  const char* name = binary_op_name(op);
  check_defined(name, a, "self");
  check_defined(name, b, "other");
  check_binary_devices(name, a, "self", b, "other");
  const Device device = binary_device(a, b);
  check_device_usable(device, name);
  const IntList shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  DType compute = promoted_dtype(a, b);
  if (rule_of(op) == optable::BinaryDType::kToFloat && !is_floating_point(compute)) compute = kFloat32;
  check_bool_arithmetic(op, compute, a, b);
  const DType result = result_dtype(op, a, b);
  // A 16-bit result the device's kernels take goes to them as it is;
  // otherwise float32 copies in, one rounding out.
  compute = result == compute ? elementwise_dtype(device, compute) : compute_dtype(compute);
  // Laid out as the first operand of the full shape (channels last stays so).
  Tensor out = empty_keeping_layout(
      shape, TensorOptions(result == compute ? result : compute_dtype(result)).device(device),
      a.sizes() == shape ? a : b);
  const Tensor ea = expand_to(elementwise_operand(a, compute), shape);
  const Tensor eb = expand_to(elementwise_operand(b, compute), shape);
  binary_stub(out.device(), op, out, ea, eb, alpha);
  return to(out, out.device(), result);
}

void binary_(BinaryOp op, const Tensor& self, const Tensor& other, Scalar alpha) {
  const char* name = binary_op_name(op);
  check_defined(name, self, "self");
  check_defined(name, other, "other");
  // other may be a CPU scalar; self is written, so it is where the op runs.
  if (!is_cpu_scalar(other)) check_same_device(name, self, "self", other, "other");
  check_kernel_device(name, self);
  const IntList shape = broadcast_shapes(self.sizes(), other.sizes(), name);
  LOOM_CHECK(shape == self.sizes(), name, "_: output with shape ", shape_str(self.sizes()),
             " doesn't match the broadcast shape ", shape_str(shape));
  const DType want = result_dtype(op, self, other);
  check_bool_arithmetic(op, promoted_dtype(self, other), self, other);
  // As in PyTorch, the result may narrow within its category (float64 into a
  // float32 self) but not move down one (float into an integer self).
  const bool castable = is_comparison(op) ? self.dtype() == kBool
                                          : dtype_category(want) <= dtype_category(self.dtype());
  LOOM_CHECK(castable, name,
             "_: result type ", dtype_name(want), " can't be cast to the desired output type ",
             dtype_name(self.dtype()));
  const DType compute = elementwise_dtype(self.device(), self.dtype());
  Tensor o = expand_to(elementwise_operand(other, compute), shape);
  if (o.storage().is_alias_of(self.storage())) o = clone(o);
  if (compute == self.dtype()) {
    binary_stub(self.device(), op, self, self, o, alpha);
  } else {
    in_compute_dtype(self, [&](const Tensor& t) { binary_stub(t.device(), op, t, t, o, alpha); });
  }
  self.bump_version();
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  check_defined("isclose", a, "self");
  check_defined("isclose", b, "other");
  check_same_device("isclose", a, "self", b, "other");
  LOOM_CHECK(rtol >= 0 && atol >= 0, "isclose: rtol and atol must be non-negative, got rtol=",
             rtol, " atol=", atol);
  const IntList shape = broadcast_shapes(a.sizes(), b.sizes(), "isclose");
  check_kernel_device("isclose", a);
  Tensor out = empty(shape, TensorOptions(kBool).device(a.device()));
  const Tensor ea = expand_to(to(a, a.device(), kFloat64), shape);
  const Tensor eb = expand_to(to(b, b.device(), kFloat64), shape);
  isclose_stub(out.device(), out, ea, eb, rtol, atol);
  return out;
}

bool all_true(const Tensor& t) {
  check_defined("all_true", t, "self");
  LOOM_CHECK(t.dtype() == kBool, "all_true: expected a bool tensor, got ", t.describe());
  const Tensor c = contiguous(to(t, Device(kCPU), kBool));
  const bool* p = static_cast<const bool*>(c.data_ptr());
  const int64_t n = c.numel();
  for (int64_t i = 0; i < n; ++i)
    if (!p[i]) return false;
  return true;
}

}  // namespace native
}  // namespace loom
