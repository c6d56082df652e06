// Binary elementwise ops (the binary table of tensor/native/BinaryOps.h:
// arithmetic, pow, maximum/minimum, comparisons; and where): forward through
// native::binary / native::where; backward through one node that runs the
// table's grad_a / grad_b formulas on tensors.  Gradients of broadcast
// inputs are summed back with sum_to and cast back to the input's dtype
// (float32 * float64 gives a float64 output, but the float32 input gets a
// float32 gradient).  Unary ops are in ElementwiseUnary.cpp.
#include "autograd/functions/Elementwise.h"

#include "autograd/functions/Record.h"
#include "autograd/functions/Reduction.h"
#include "tensor/Factory.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Where.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;
using native::BinaryOp;

namespace {

// What a backward rule needs to know about a forward input it returns a
// gradient for: its shape (to undo broadcasting) and dtype.
struct InputMeta {
  IntList sizes;
  DType dtype = kFloat32;
  Device device;
};
InputMeta meta_of(const Tensor& t) { return {t.sizes(), t.dtype(), t.device()}; }

// The gradient of a broadcast input: summed down to its shape, in its dtype,
// on its device (a CPU scalar beside CUDA tensors gets its gradient back on
// the CPU).
Tensor reduce_grad(const Tensor& grad, const InputMeta& input) {
  Tensor g = sum_to(grad, input.sizes);
  if (g.dtype() != input.dtype) g = g.to(input.dtype);
  return g.device() == input.device ? g : g.to(input.device);
}

// (saves a, saves b, saves out) of a table op.
struct BinarySaves {
  bool a = false, b = false, out = false;
};
BinarySaves saves_of(BinaryOp op) {
  BinarySaves s;
  native::visit_binary_op(op, [&](auto tag) {
    using Op = typename decltype(tag)::type;
    s = {Op::saves_a, Op::saves_b, Op::saves_out};
  });
  return s;
}

// "maximum" -> "MaximumBackward".
std::string backward_name(BinaryOp op) {
  std::string name = native::binary_op_name(op);
  name[0] = static_cast<char>(name[0] - 'a' + 'A');
  return name + "Backward";
}

// Backward of out = a op b for an arithmetic op of the binary table: the
// op's grad_a / grad_b formulas with T = Tensor, each summed back over the
// dims its input was broadcast along.
class BinaryOpBackward final : public Node {
 public:
  BinaryOpBackward(BinaryOp op, const optable::BinaryArgs& args, InputMeta a_meta, InputMeta b_meta)
      : op_(op), args_(args), a_meta_(std::move(a_meta)), b_meta_(std::move(b_meta)) {}
  std::string name() const override { return backward_name(op_); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor av = a.unpack(*this), bv = b.unpack(*this), ov = out.unpack(*this);
    Tensor ga, gb;
    native::visit_binary_op(op_, [&](auto tag) {
      using Op = typename decltype(tag)::type;
      const Op rule = optable::make_op<Op>(args_);
      if (needs_input_grad(0))
        ga = reduce_grad(rule.template grad_a<Tensor>(g, av, bv, ov), a_meta_);
      if (needs_input_grad(1))
        gb = reduce_grad(rule.template grad_b<Tensor>(g, av, bv, ov), b_meta_);
    });
    return {ga, gb};
  }
  void release_saved() override {
    a.reset();
    b.reset();
    out.reset();
  }
  SavedTensor a, b, out;

 private:
  BinaryOp op_;
  optable::BinaryArgs args_;
  InputMeta a_meta_, b_meta_;
};

// where(cond, a, b): the gradient goes to a where cond holds, to b elsewhere.
class WhereBackward final : public Node {
 public:
  std::string name() const override { return "WhereBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor c = condition.unpack(*this);
    const Tensor zero = native::wrap_scalar(0, g);
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = reduce_grad(loom::where(c, g, zero), a_meta);
    if (needs_input_grad(1)) gb = reduce_grad(loom::where(c, zero, g), b_meta);
    return {ga, gb};
  }
  void release_saved() override { condition.reset(); }
  SavedTensor condition;
  InputMeta a_meta, b_meta;
};

// a op b, recorded for autograd when the result is floating (comparisons
// never are).
Tensor arith(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha = 1) {
  Tensor out = native::binary(op, a, b, alpha);
  if (!out.is_floating_point() || native::is_comparison(op)) return out;
  if (auto node = record<BinaryOpBackward>({a, b}, {out}, op, optable::BinaryArgs{alpha.to_double()},
                                           meta_of(a), meta_of(b))) {
    const BinarySaves saves = saves_of(op);
    if (saves.a) node->a = SavedTensor(a, false);
    if (saves.b) node->b = SavedTensor(b, false);
    if (saves.out) node->out = SavedTensor(out, true);
  }
  return out;
}

// In place: self's old history becomes input 0 of the recorded node (edges
// are taken before self gets its new grad_fn), and self its output.
Tensor& arith_(BinaryOp op, Tensor& self, const Tensor& other, Scalar alpha = 1) {
  if (!autograd::any_requires_grad({&self, &other})) {
    native::binary_(op, self, other, alpha);
    return self;
  }
  autograd::check_inplace(self, native::binary_op_name(op));
  const BinarySaves saves = saves_of(op);
  // A rule reading a needs self's value from before the write.
  const Tensor old = saves.a ? native::clone(self) : Tensor();
  const InputMeta self_meta = meta_of(self);
  {
    NoGradGuard no_grad;
    native::binary_(op, self, other, alpha);
  }
  auto node = std::make_shared<BinaryOpBackward>(op, optable::BinaryArgs{alpha.to_double()},
                                                 self_meta, meta_of(other));
  if (saves.a) node->a = SavedTensor(old, false);
  if (saves.b) node->b = SavedTensor(other, false);
  if (saves.out) node->out = SavedTensor(self, true);
  autograd::set_history(node, {self, other}, {self});
  return self;
}

Tensor compare(BinaryOp op, const Tensor& a, const Tensor& b) { return native::binary(op, a, b); }

template <typename Op>
BinaryOp id() {
  return native::binary_op<Op>();
}

}  // namespace

// ---- free functions -------------------------------------------------------------

Tensor add(const Tensor& self, const Tensor& other, Scalar alpha) {
  return arith(id<optable::Add>(), self, other, alpha);
}
Tensor add(const Tensor& self, Scalar other) {
  return arith(id<optable::Add>(), self, native::scalar_operand(other, self));
}
Tensor sub(const Tensor& self, const Tensor& other, Scalar alpha) {
  return arith(id<optable::Sub>(), self, other, alpha);
}
Tensor sub(const Tensor& self, Scalar other) {
  return arith(id<optable::Sub>(), self, native::scalar_operand(other, self));
}
Tensor rsub(const Tensor& self, Scalar other) {
  return arith(id<optable::Sub>(), native::scalar_operand(other, self), self);
}
Tensor mul(const Tensor& self, const Tensor& other) { return arith(id<optable::Mul>(), self, other); }
Tensor mul(const Tensor& self, Scalar other) {
  return arith(id<optable::Mul>(), self, native::scalar_operand(other, self));
}
Tensor div(const Tensor& self, const Tensor& other) { return arith(id<optable::Div>(), self, other); }
Tensor div(const Tensor& self, Scalar other) {
  return arith(id<optable::Div>(), self, native::scalar_operand(other, self));
}
Tensor rdiv(const Tensor& self, Scalar other) {
  return arith(id<optable::Div>(), native::scalar_operand(other, self), self);
}
Tensor pow(const Tensor& self, const Tensor& exponent) {
  return arith(id<optable::Pow>(), self, exponent);
}
Tensor maximum(const Tensor& self, const Tensor& other) {
  return arith(id<optable::Maximum>(), self, other);
}
Tensor minimum(const Tensor& self, const Tensor& other) {
  return arith(id<optable::Minimum>(), self, other);
}

Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  Tensor out = native::where(condition, self, other);
  if (out.is_floating_point())
    if (auto node = record<WhereBackward>({self, other}, {out})) {
      node->condition = SavedTensor(condition, false);
      node->a_meta = meta_of(self);
      node->b_meta = meta_of(other);
    }
  return out;
}

Tensor where(const Tensor& condition, const Tensor& self, Scalar other) {
  return where(condition, self, native::wrap_scalar(other, self));
}
Tensor where(const Tensor& condition, Scalar self, const Tensor& other) {
  return where(condition, native::wrap_scalar(self, other), other);
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare(id<optable::Eq>(), a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(id<optable::Ne>(), a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(id<optable::Lt>(), a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(id<optable::Le>(), a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(id<optable::Gt>(), a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(id<optable::Ge>(), a, b); }
Tensor eq(const Tensor& a, Scalar b) { return eq(a, native::scalar_operand(b, a)); }
Tensor ne(const Tensor& a, Scalar b) { return ne(a, native::scalar_operand(b, a)); }
Tensor lt(const Tensor& a, Scalar b) { return lt(a, native::scalar_operand(b, a)); }
Tensor le(const Tensor& a, Scalar b) { return le(a, native::scalar_operand(b, a)); }
Tensor gt(const Tensor& a, Scalar b) { return gt(a, native::scalar_operand(b, a)); }
Tensor ge(const Tensor& a, Scalar b) { return ge(a, native::scalar_operand(b, a)); }

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  return native::all_true(native::isclose(a, b, rtol, atol));
}

bool equal(const Tensor& a, const Tensor& b) {
  native::check_defined("equal", a, "self");
  native::check_defined("equal", b, "other");
  native::check_same_device("equal", a, "self", b, "other");
  if (a.sizes() != b.sizes()) return false;
  return native::all_true(native::binary(id<optable::Eq>(), a, b));
}

// ---- Tensor methods and operators ---------------------------------------------

Tensor Tensor::add(const Tensor& o, Scalar alpha) const { return loom::add(*this, o, alpha); }
Tensor Tensor::add(Scalar o) const { return loom::add(*this, o); }
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const { return loom::sub(*this, o, alpha); }
Tensor Tensor::sub(Scalar o) const { return loom::sub(*this, o); }
Tensor Tensor::mul(const Tensor& o) const { return loom::mul(*this, o); }
Tensor Tensor::mul(Scalar o) const { return loom::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return loom::div(*this, o); }
Tensor Tensor::div(Scalar o) const { return loom::div(*this, o); }
Tensor& Tensor::add_(const Tensor& o, Scalar alpha) {
  return arith_(id<optable::Add>(), *this, o, alpha);
}
Tensor& Tensor::add_(Scalar o) {
  return arith_(id<optable::Add>(), *this, native::scalar_operand(o, *this));
}
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) {
  return arith_(id<optable::Sub>(), *this, o, alpha);
}
Tensor& Tensor::sub_(Scalar o) {
  return arith_(id<optable::Sub>(), *this, native::scalar_operand(o, *this));
}
Tensor& Tensor::mul_(const Tensor& o) { return arith_(id<optable::Mul>(), *this, o); }
Tensor& Tensor::mul_(Scalar o) {
  return arith_(id<optable::Mul>(), *this, native::scalar_operand(o, *this));
}
Tensor& Tensor::div_(const Tensor& o) { return arith_(id<optable::Div>(), *this, o); }
Tensor& Tensor::div_(Scalar o) {
  return arith_(id<optable::Div>(), *this, native::scalar_operand(o, *this));
}
Tensor Tensor::pow(const Tensor& exponent) const { return loom::pow(*this, exponent); }
Tensor Tensor::eq(const Tensor& o) const { return loom::eq(*this, o); }
Tensor Tensor::eq(Scalar o) const { return loom::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return loom::ne(*this, o); }
Tensor Tensor::ne(Scalar o) const { return loom::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return loom::lt(*this, o); }
Tensor Tensor::lt(Scalar o) const { return loom::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return loom::le(*this, o); }
Tensor Tensor::le(Scalar o) const { return loom::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return loom::gt(*this, o); }
Tensor Tensor::gt(Scalar o) const { return loom::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return loom::ge(*this, o); }
Tensor Tensor::ge(Scalar o) const { return loom::ge(*this, o); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(Scalar a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b) { return rdiv(b, a); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, Scalar b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, b); }
Tensor operator<(const Tensor& a, Scalar b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, Scalar b) { return le(a, b); }
Tensor operator>(const Tensor& a, Scalar b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, b); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, Scalar b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, Scalar b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, Scalar b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, Scalar b) { return a.div_(b); }

}  // namespace loom
