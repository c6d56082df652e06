// Binary elementwise ops (arithmetic, pow, maximum/minimum, where,
// comparisons): forward through native::binary / native::where, backward
// rules below.  Gradients of broadcast inputs are summed back with sum_to and
// cast back to the input's dtype (float32 * float64 gives a float64 output,
// but the float32 input gets a float32 gradient).  Unary ops are in
// ElementwiseUnary.cpp.
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
};
InputMeta meta_of(const Tensor& t) { return {t.sizes(), t.dtype()}; }

// A raw (untracked) result, for masks in backward rules: they are piecewise
// constant, so leaving them out of the graph is exact for any order.
Tensor raw(BinaryOp op, const Tensor& a, const Tensor& b) { return native::binary(op, a, b); }
Tensor raw(BinaryOp op, const Tensor& a, Scalar b) {
  return native::binary(op, a, native::wrap_scalar(b, a));
}

// The gradient of a broadcast input: summed down to its shape, in its dtype.
Tensor reduce_grad(const Tensor& grad, const InputMeta& input) {
  Tensor g = sum_to(grad, input.sizes);
  return g.dtype() == input.dtype ? g : g.to(input.dtype);
}

// d(a + alpha*b): grad to a, alpha*grad to b (negated for sub).
class AddBackward final : public Node {
 public:
  AddBackward(InputMeta a, InputMeta b, double alpha)
      : a_(std::move(a)), b_(std::move(b)), alpha_(alpha) {}
  std::string name() const override { return "AddBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = reduce_grad(g, a_);
    if (needs_input_grad(1)) gb = reduce_grad(alpha_ == 1 ? g : g * alpha_, b_);
    return {ga, gb};
  }

 private:
  InputMeta a_, b_;
  double alpha_;
};

class MulBackward final : public Node {
 public:
  std::string name() const override { return "MulBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = reduce_grad(g * b.unpack(*this), a_meta);
    if (needs_input_grad(1)) gb = reduce_grad(g * a.unpack(*this), b_meta);
    return {ga, gb};
  }
  void release_saved() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
  InputMeta a_meta, b_meta;
};

class DivBackward final : public Node {
 public:
  std::string name() const override { return "DivBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor bv = b.unpack(*this);
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = reduce_grad(g / bv, a_meta);
    if (needs_input_grad(1)) gb = reduce_grad(-g * a.unpack(*this) / (bv * bv), b_meta);
    return {ga, gb};
  }
  void release_saved() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
  InputMeta a_meta, b_meta;
};

// out = a ** b:  d/da = b * a^(b-1);  d/db = out * log(a), taken as 0 where
// a == 0 and b >= 0 (the limit PyTorch uses, instead of 0 * -inf).
class PowBackward final : public Node {
 public:
  std::string name() const override { return "PowBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor av = a.unpack(*this), bv = b.unpack(*this);
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = reduce_grad(g * bv * loom::pow(av, bv - 1), a_meta);
    if (needs_input_grad(1)) {
      const Tensor g_log = g * out.unpack(*this) * loom::log(av);
      // bool * bool is logical and.
      const Tensor zero_limit =
          raw(BinaryOp::kMul, raw(BinaryOp::kEq, av, 0), raw(BinaryOp::kGe, bv, 0));
      gb = reduce_grad(loom::where(zero_limit, native::wrap_scalar(0, g_log), g_log), b_meta);
    }
    return {ga, gb};
  }
  void release_saved() override {
    a.reset();
    b.reset();
    out.reset();
  }
  SavedTensor a, b, out;
  InputMeta a_meta, b_meta;
};

// maximum/minimum: the gradient goes to the chosen input; ties split it
// evenly, as in PyTorch.
class MaxMinBackward final : public Node {
 public:
  explicit MaxMinBackward(bool is_max) : is_max_(is_max) {}
  std::string name() const override { return is_max_ ? "MaximumBackward" : "MinimumBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor av = a.unpack(*this), bv = b.unpack(*this);
    // Share of the gradient going to a: 1 where a wins, 0.5 on ties, else 0.
    const Tensor a_wins = raw(is_max_ ? BinaryOp::kGt : BinaryOp::kLt, av, bv);
    const Tensor tie = raw(BinaryOp::kEq, av, bv);
    const Tensor share_a = native::where(
        tie, native::wrap_scalar(0.5, g),
        native::where(a_wins, native::wrap_scalar(1.0, g), native::wrap_scalar(0.0, g)));
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = reduce_grad(g * share_a, a_meta);
    if (needs_input_grad(1)) gb = reduce_grad(g * (1 - share_a), b_meta);
    return {ga, gb};
  }
  void release_saved() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
  InputMeta a_meta, b_meta;

 private:
  bool is_max_;
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

// Converts a non-floating operand to the result dtype so the graph stays float.
Tensor arith(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha = 1) {
  Tensor out = native::binary(op, a, b, alpha);
  const bool differentiable = out.is_floating_point();
  switch (op) {
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
      if (differentiable) {
        const double s = op == BinaryOp::kSub ? -alpha.to_double() : alpha.to_double();
        record<AddBackward>({a, b}, {out}, meta_of(a), meta_of(b), s);
      }
      break;
    case BinaryOp::kMul:
      if (differentiable)
        if (auto node = record<MulBackward>({a, b}, {out})) {
          node->a = SavedTensor(a, false);
          node->b = SavedTensor(b, false);
          node->a_meta = meta_of(a);
          node->b_meta = meta_of(b);
        }
      break;
    case BinaryOp::kDiv:
      if (differentiable)
        if (auto node = record<DivBackward>({a, b}, {out})) {
          node->a = SavedTensor(a, false);
          node->b = SavedTensor(b, false);
          node->a_meta = meta_of(a);
          node->b_meta = meta_of(b);
        }
      break;
    case BinaryOp::kPow:
      if (differentiable)
        if (auto node = record<PowBackward>({a, b}, {out})) {
          node->a = SavedTensor(a, false);
          node->b = SavedTensor(b, false);
          node->out = SavedTensor(out, true);
          node->a_meta = meta_of(a);
          node->b_meta = meta_of(b);
        }
      break;
    case BinaryOp::kMaximum:
    case BinaryOp::kMinimum:
      if (differentiable)
        if (auto node = record<MaxMinBackward>({a, b}, {out}, op == BinaryOp::kMaximum)) {
          node->a = SavedTensor(a, false);
          node->b = SavedTensor(b, false);
          node->a_meta = meta_of(a);
          node->b_meta = meta_of(b);
        }
      break;
    default:
      LOOM_FAIL("arith: unexpected op ", native::binary_op_name(op));
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
  // mul/div need self's value from before the write.
  const bool save_old = (op == BinaryOp::kMul || op == BinaryOp::kDiv) && other.requires_grad();
  const Tensor old = save_old ? native::clone(self) : Tensor();
  const InputMeta self_meta = meta_of(self);
  {
    NoGradGuard no_grad;
    native::binary_(op, self, other, alpha);
  }
  std::shared_ptr<Node> node;
  if (op == BinaryOp::kAdd || op == BinaryOp::kSub) {
    const double s = op == BinaryOp::kSub ? -alpha.to_double() : alpha.to_double();
    node = std::make_shared<AddBackward>(self_meta, meta_of(other), s);
  } else if (op == BinaryOp::kMul) {
    auto mul = std::make_shared<MulBackward>();
    mul->a = SavedTensor(old, false);
    mul->b = SavedTensor(other, false);
    mul->a_meta = self_meta;
    mul->b_meta = meta_of(other);
    node = mul;
  } else {
    // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2 with a the old value.
    auto div = std::make_shared<DivBackward>();
    div->a = SavedTensor(old, false);
    div->b = SavedTensor(other, false);
    div->a_meta = self_meta;
    div->b_meta = meta_of(other);
    node = div;
  }
  autograd::set_history(node, {self, other}, {self});
  return self;
}

Tensor compare(BinaryOp op, const Tensor& a, const Tensor& b) { return native::binary(op, a, b); }

}  // namespace

// ---- free functions -------------------------------------------------------------

Tensor add(const Tensor& self, const Tensor& other, Scalar alpha) {
  return arith(BinaryOp::kAdd, self, other, alpha);
}
Tensor add(const Tensor& self, Scalar other) {
  return arith(BinaryOp::kAdd, self, native::wrap_scalar(other, self));
}
Tensor sub(const Tensor& self, const Tensor& other, Scalar alpha) {
  return arith(BinaryOp::kSub, self, other, alpha);
}
Tensor sub(const Tensor& self, Scalar other) {
  return arith(BinaryOp::kSub, self, native::wrap_scalar(other, self));
}
Tensor rsub(const Tensor& self, Scalar other) {
  return arith(BinaryOp::kSub, native::wrap_scalar(other, self), self);
}
Tensor mul(const Tensor& self, const Tensor& other) { return arith(BinaryOp::kMul, self, other); }
Tensor mul(const Tensor& self, Scalar other) {
  return arith(BinaryOp::kMul, self, native::wrap_scalar(other, self));
}
Tensor div(const Tensor& self, const Tensor& other) { return arith(BinaryOp::kDiv, self, other); }
Tensor div(const Tensor& self, Scalar other) {
  return arith(BinaryOp::kDiv, self, native::wrap_scalar(other, self));
}
Tensor rdiv(const Tensor& self, Scalar other) {
  return arith(BinaryOp::kDiv, native::wrap_scalar(other, self), self);
}
Tensor pow(const Tensor& self, const Tensor& exponent) {
  return arith(BinaryOp::kPow, self, exponent);
}
Tensor maximum(const Tensor& self, const Tensor& other) {
  return arith(BinaryOp::kMaximum, self, other);
}
Tensor minimum(const Tensor& self, const Tensor& other) {
  return arith(BinaryOp::kMinimum, self, other);
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

Tensor eq(const Tensor& a, const Tensor& b) { return compare(BinaryOp::kEq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(BinaryOp::kNe, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(BinaryOp::kLt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(BinaryOp::kLe, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(BinaryOp::kGt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(BinaryOp::kGe, a, b); }
Tensor eq(const Tensor& a, Scalar b) { return eq(a, native::wrap_scalar(b, a)); }
Tensor ne(const Tensor& a, Scalar b) { return ne(a, native::wrap_scalar(b, a)); }
Tensor lt(const Tensor& a, Scalar b) { return lt(a, native::wrap_scalar(b, a)); }
Tensor le(const Tensor& a, Scalar b) { return le(a, native::wrap_scalar(b, a)); }
Tensor gt(const Tensor& a, Scalar b) { return gt(a, native::wrap_scalar(b, a)); }
Tensor ge(const Tensor& a, Scalar b) { return ge(a, native::wrap_scalar(b, a)); }

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  return native::all_true(native::isclose(a, b, rtol, atol));
}

bool equal(const Tensor& a, const Tensor& b) {
  native::check_defined("equal", a, "self");
  native::check_defined("equal", b, "other");
  native::check_same_device("equal", a, "self", b, "other");
  if (a.sizes() != b.sizes()) return false;
  return native::all_true(native::binary(BinaryOp::kEq, a, b));
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
Tensor& Tensor::add_(const Tensor& o, Scalar alpha) { return arith_(BinaryOp::kAdd, *this, o, alpha); }
Tensor& Tensor::add_(Scalar o) { return arith_(BinaryOp::kAdd, *this, native::wrap_scalar(o, *this)); }
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) { return arith_(BinaryOp::kSub, *this, o, alpha); }
Tensor& Tensor::sub_(Scalar o) { return arith_(BinaryOp::kSub, *this, native::wrap_scalar(o, *this)); }
Tensor& Tensor::mul_(const Tensor& o) { return arith_(BinaryOp::kMul, *this, o); }
Tensor& Tensor::mul_(Scalar o) { return arith_(BinaryOp::kMul, *this, native::wrap_scalar(o, *this)); }
Tensor& Tensor::div_(const Tensor& o) { return arith_(BinaryOp::kDiv, *this, o); }
Tensor& Tensor::div_(Scalar o) { return arith_(BinaryOp::kDiv, *this, native::wrap_scalar(o, *this)); }
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
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, Scalar b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, Scalar b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, Scalar b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, Scalar b) { return a.div_(b); }

}  // namespace loom
