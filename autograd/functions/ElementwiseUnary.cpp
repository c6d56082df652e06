// Unary elementwise ops (neg, abs, exp, log, sqrt, rsqrt, pow with a scalar
// exponent, relu, sigmoid, tanh, clamp): forward through native/Unary,
// backward rules below.
//
// Rules that need the output (exp, sqrt, rsqrt, relu, sigmoid, tanh) save it,
// as PyTorch does, so the input can be freed.  Each rule runs a fused native
// kernel (one pass: grad and saved in, gradient out); under create_graph it
// is written with differentiable ops instead so the gradient has a history.
// Saved outputs are kept detached (see SavedTensor), so a second derivative
// through them treats the output as a constant; rules on saved inputs (abs,
// log, pow, clamp) are exact to any order.
#include "autograd/functions/Elementwise.h"

#include "autograd/GradMode.h"
#include "autograd/functions/Record.h"
#include "tensor/Factory.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Unary.h"

namespace loom {

using autograd::GradMode;
using autograd::Node;
using autograd::record;
using autograd::SavedTensor;
using native::UnaryBackwardOp;
using native::UnaryOp;

namespace {

// Whether backward must build a graph of its own (create_graph).
bool creating_graph() { return GradMode::is_enabled(); }

// Backward of y = f(x) whose rule needs one saved tensor (x or y).
class UnaryBackward final : public Node {
 public:
  using Rule = Tensor (*)(const Tensor& grad, const Tensor& saved);
  UnaryBackward(std::string name, Rule rule) : name_(std::move(name)), rule_(rule) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {rule_(grads[0], saved.unpack(*this))};
  }
  void release_saved() override { saved.reset(); }
  SavedTensor saved;

 private:
  std::string name_;
  Rule rule_;
};

// ---- rules: (grad, saved) -> grad of the input ----------------------------------

Tensor neg_rule(const Tensor& g, const Tensor&) { return loom::neg(g); }

Tensor abs_rule(const Tensor& g, const Tensor& x) {
  // sign(x) is piecewise constant: a raw tensor is exact for any order.
  if (creating_graph()) return g * native::unary(UnaryOp::kSign, x);
  return native::unary_backward(UnaryBackwardOp::kAbs, g, x);
}

Tensor exp_rule(const Tensor& g, const Tensor& out) { return g * out; }

Tensor log_rule(const Tensor& g, const Tensor& x) { return g / x; }

Tensor sqrt_rule(const Tensor& g, const Tensor& out) {
  if (creating_graph()) return g / (out * 2);
  return native::unary_backward(UnaryBackwardOp::kSqrt, g, out);
}

Tensor rsqrt_rule(const Tensor& g, const Tensor& out) {
  if (creating_graph()) return g * (out * out * out * -0.5);
  return native::unary_backward(UnaryBackwardOp::kRsqrt, g, out);
}

Tensor relu_rule(const Tensor& g, const Tensor& out) {
  if (creating_graph()) {
    // The mask out > 0 is piecewise constant: a raw tensor is exact.
    return g * native::binary(native::BinaryOp::kGt, out, native::wrap_scalar(0, out));
  }
  return native::unary_backward(UnaryBackwardOp::kRelu, g, out);
}

Tensor sigmoid_rule(const Tensor& g, const Tensor& out) {
  if (creating_graph()) return g * (out * (1 - out));
  return native::unary_backward(UnaryBackwardOp::kSigmoid, g, out);
}

Tensor tanh_rule(const Tensor& g, const Tensor& out) {
  if (creating_graph()) return g * (1 - out * out);
  return native::unary_backward(UnaryBackwardOp::kTanh, g, out);
}

// Records y = f(x) with `rule`, saving x (is_output false) or y.
Tensor record_unary(const char* name, UnaryBackward::Rule rule, const Tensor& self,
                    const Tensor& out, bool save_output) {
  if (!out.is_floating_point()) return out;
  if (auto node = record<UnaryBackward>({self}, {out}, name, rule))
    node->saved = save_output ? SavedTensor(out, true) : SavedTensor(self, false);
  return out;
}

Tensor unary_op(UnaryOp op, const char* backward_name, UnaryBackward::Rule rule,
                const Tensor& self, bool save_output) {
  return record_unary(backward_name, rule, self, native::unary(op, self), save_output);
}

// self ** exponent: grad * e * self^(e-1).
class PowScalarBackward final : public Node {
 public:
  explicit PowScalarBackward(double exponent) : exponent_(exponent) {}
  std::string name() const override { return "PowBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor x = self.unpack(*this);
    if (!creating_graph()) return {native::pow_backward(g, x, exponent_)};
    if (exponent_ == 0) return {zeros_like(x)};
    return {g * (loom::pow(x, exponent_ - 1) * exponent_)};
  }
  void release_saved() override { self.reset(); }
  SavedTensor self;

 private:
  double exponent_;
};

// clamp: the gradient passes where min <= x <= max (x the input).
class ClampBackward final : public Node {
 public:
  ClampBackward(std::optional<Scalar> min, std::optional<Scalar> max) : min_(min), max_(max) {}
  std::string name() const override { return "ClampBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor x = self.unpack(*this);
    if (!creating_graph()) return {native::clamp_backward(g, x, min_, max_)};
    // The pass mask is piecewise constant, so a raw tensor is exact.
    return {g * native::clamp_backward(ones_like(x), x, min_, max_)};
  }
  void release_saved() override { self.reset(); }
  SavedTensor self;

 private:
  std::optional<Scalar> min_, max_;
};

}  // namespace

// ---- free functions -------------------------------------------------------------

Tensor neg(const Tensor& self) {
  return unary_op(UnaryOp::kNeg, "NegBackward", neg_rule, self, false);
}
Tensor abs(const Tensor& self) {
  return unary_op(UnaryOp::kAbs, "AbsBackward", abs_rule, self, false);
}
Tensor exp(const Tensor& self) {
  return unary_op(UnaryOp::kExp, "ExpBackward", exp_rule, self, true);
}
Tensor log(const Tensor& self) {
  return unary_op(UnaryOp::kLog, "LogBackward", log_rule, self, false);
}
Tensor sqrt(const Tensor& self) {
  return unary_op(UnaryOp::kSqrt, "SqrtBackward", sqrt_rule, self, true);
}
Tensor rsqrt(const Tensor& self) {
  return unary_op(UnaryOp::kRsqrt, "RsqrtBackward", rsqrt_rule, self, true);
}
Tensor relu(const Tensor& self) {
  return unary_op(UnaryOp::kRelu, "ReluBackward", relu_rule, self, true);
}
Tensor sigmoid(const Tensor& self) {
  return unary_op(UnaryOp::kSigmoid, "SigmoidBackward", sigmoid_rule, self, true);
}
Tensor tanh(const Tensor& self) {
  return unary_op(UnaryOp::kTanh, "TanhBackward", tanh_rule, self, true);
}

Tensor pow(const Tensor& self, Scalar exponent) {
  Tensor out = native::pow(self, exponent);
  if (out.is_floating_point())
    if (auto node = record<PowScalarBackward>({self}, {out}, exponent.to_double()))
      node->self = SavedTensor(self, false);
  return out;
}

Tensor clamp(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max) {
  Tensor out = native::clamp(self, min, max);
  if (out.is_floating_point())
    if (auto node = record<ClampBackward>({self}, {out}, min, max))
      node->self = SavedTensor(self, false);
  return out;
}

// ---- Tensor methods -------------------------------------------------------------

Tensor Tensor::neg() const { return loom::neg(*this); }
Tensor Tensor::abs() const { return loom::abs(*this); }
Tensor Tensor::exp() const { return loom::exp(*this); }
Tensor Tensor::log() const { return loom::log(*this); }
Tensor Tensor::sqrt() const { return loom::sqrt(*this); }
Tensor Tensor::rsqrt() const { return loom::rsqrt(*this); }
Tensor Tensor::pow(Scalar exponent) const { return loom::pow(*this, exponent); }
Tensor Tensor::relu() const { return loom::relu(*this); }
Tensor Tensor::sigmoid() const { return loom::sigmoid(*this); }
Tensor Tensor::tanh() const { return loom::tanh(*this); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return loom::clamp(*this, min, max);
}

// In place: self's old history becomes the node's input (edges are taken
// before self gets its new grad_fn), and self its output.
Tensor& Tensor::relu_() {
  if (!autograd::any_requires_grad({this})) {
    native::unary_(UnaryOp::kRelu, *this);
    return *this;
  }
  autograd::check_inplace(*this, "relu_");
  {
    NoGradGuard no_grad;
    native::unary_(UnaryOp::kRelu, *this);
  }
  auto node = std::make_shared<UnaryBackward>("ReluBackward", relu_rule);
  node->saved = SavedTensor(*this, true);  // the output: relu's rule needs only out > 0
  autograd::set_history(node, {*this}, {*this});
  return *this;
}

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  if (!autograd::any_requires_grad({this})) {
    native::clamp_(*this, min, max);
    return *this;
  }
  autograd::check_inplace(*this, "clamp_");
  const Tensor old = native::clone(*this);  // the rule needs the input
  {
    NoGradGuard no_grad;
    native::clamp_(*this, min, max);
  }
  auto node = std::make_shared<ClampBackward>(min, max);
  node->self = SavedTensor(old, false);
  autograd::set_history(node, {*this}, {*this});
  return *this;
}

}  // namespace loom
