// Elementwise ops: forward through native::binary / native::unary, backward
// rules below (gradients of broadcast inputs are summed back with sum_to).
#include "autograd/functions/Elementwise.h"

#include "autograd/functions/Record.h"
#include "autograd/functions/Reduction.h"
#include "tensor/Factory.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;
using native::BinaryOp;

namespace {

// d(a + alpha*b): grad to a, alpha*grad to b (negated for sub).
class AddBackward final : public Node {
 public:
  AddBackward(IntList a_sizes, IntList b_sizes, double alpha)
      : a_sizes_(std::move(a_sizes)), b_sizes_(std::move(b_sizes)), alpha_(alpha) {}
  std::string name() const override { return "AddBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(g, a_sizes_);
    if (needs_input_grad(1)) gb = sum_to(alpha_ == 1 ? g : g * alpha_, b_sizes_);
    return {ga, gb};
  }

 private:
  IntList a_sizes_, b_sizes_;
  double alpha_;
};

class MulBackward final : public Node {
 public:
  std::string name() const override { return "MulBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(g * b.unpack(*this), a_sizes);
    if (needs_input_grad(1)) gb = sum_to(g * a.unpack(*this), b_sizes);
    return {ga, gb};
  }
  void release_saved() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
  IntList a_sizes, b_sizes;
};

class DivBackward final : public Node {
 public:
  std::string name() const override { return "DivBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor bv = b.unpack(*this);
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(g / bv, a_sizes);
    if (needs_input_grad(1)) gb = sum_to(-g * a.unpack(*this) / (bv * bv), b_sizes);
    return {ga, gb};
  }
  void release_saved() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
  IntList a_sizes, b_sizes;
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
        record<AddBackward>({a, b}, {out}, a.sizes(), b.sizes(), s);
      }
      break;
    case BinaryOp::kMul:
      if (differentiable)
        if (auto node = record<MulBackward>({a, b}, {out})) {
          node->a = SavedTensor(a, false);
          node->b = SavedTensor(b, false);
          node->a_sizes = a.sizes();
          node->b_sizes = b.sizes();
        }
      break;
    case BinaryOp::kDiv:
      if (differentiable)
        if (auto node = record<DivBackward>({a, b}, {out})) {
          node->a = SavedTensor(a, false);
          node->b = SavedTensor(b, false);
          node->a_sizes = a.sizes();
          node->b_sizes = b.sizes();
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
  const IntList self_sizes = self.sizes();
  {
    NoGradGuard no_grad;
    native::binary_(op, self, other, alpha);
  }
  std::shared_ptr<Node> node;
  if (op == BinaryOp::kAdd || op == BinaryOp::kSub) {
    const double s = op == BinaryOp::kSub ? -alpha.to_double() : alpha.to_double();
    node = std::make_shared<AddBackward>(self_sizes, other.sizes(), s);
  } else if (op == BinaryOp::kMul) {
    auto mul = std::make_shared<MulBackward>();
    mul->a = SavedTensor(old, false);
    mul->b = SavedTensor(other, false);
    mul->a_sizes = self_sizes;
    mul->b_sizes = other.sizes();
    node = mul;
  } else {
    // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2 with a the old value.
    auto div = std::make_shared<DivBackward>();
    div->a = SavedTensor(old, false);
    div->b = SavedTensor(other, false);
    div->a_sizes = self_sizes;
    div->b_sizes = other.sizes();
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
Tensor neg(const Tensor& self) { return mul(self, -1); }
Tensor rdiv(const Tensor& self, Scalar other) {
  return arith(BinaryOp::kDiv, native::wrap_scalar(other, self), self);
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
