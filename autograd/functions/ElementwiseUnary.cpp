// Unary elementwise ops: the ops of the unary table (tensor/native/UnaryOps.h:
// neg, abs, exp, ..., relu, gelu, silu, ...) through one node, and pow with a
// scalar exponent and clamp.
//
// A table op's backward runs its formula as one fused kernel
// (native::unary_backward); under create_graph it runs the same formula
// with T = Tensor (UnaryOps.h), so the gradient has a history of its own.
// Ops whose rule needs the output (exp, sqrt, relu, sigmoid, tanh, ...) save
// it, as PyTorch does, so the input can be freed.  Saved outputs are kept
// detached (see SavedTensor), so a second derivative through them treats the
// output as a constant; rules on saved inputs are exact to any order.
#include "autograd/functions/Elementwise.h"
#include "autograd/Autocast.h"

#include <cctype>

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
using native::UnaryArgs;
using native::UnaryOp;

namespace {

// Whether backward must build a graph of its own (create_graph).
bool creating_graph() { return GradMode::is_enabled(); }

optable::UnarySaves saves_of(UnaryOp op) {
  optable::UnarySaves saves = optable::UnarySaves::kNothing;
  native::visit_unary_op(op, [&](auto tag) { saves = decltype(tag)::type::saves; });
  return saves;
}

// "leaky_relu" -> "LeakyReluBackward".
std::string backward_name(UnaryOp op) {
  std::string out;
  bool upper = true;
  for (const char* c = native::unary_op_name(op); *c; ++c) {
    if (*c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(*c))) : *c;
    upper = false;
  }
  return out + "Backward";
}

// Backward of y = op(x) for an op of the unary table.
class UnaryOpBackward final : public Node {
 public:
  UnaryOpBackward(UnaryOp op, const UnaryArgs& args) : op_(op), args_(args) {}
  std::string name() const override { return backward_name(op_); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const bool needs_saved = saves_of(op_) != optable::UnarySaves::kNothing;
    const Tensor s = needs_saved ? saved.unpack(*this) : Tensor();
    if (needs_saved && !creating_graph()) return {native::unary_backward(op_, g, s, args_)};
    Tensor grad;
    native::visit_unary_op(op_, [&](auto tag) {
      using Op = typename decltype(tag)::type;
      grad = optable::make_op<Op>(args_).template backward<Tensor>(g, s);
    });
    return {grad};
  }
  void release_saved() override { saved.reset(); }
  SavedTensor saved;

 private:
  UnaryOp op_;
  UnaryArgs args_;
};

// Saves what op's backward needs: the input x or the output y.
void save_for_backward(UnaryOpBackward& node, UnaryOp op, const Tensor& x, const Tensor& y) {
  switch (saves_of(op)) {
    case optable::UnarySaves::kInput: node.saved = SavedTensor(x, false); break;
    case optable::UnarySaves::kOutput: node.saved = SavedTensor(y, true); break;
    case optable::UnarySaves::kNothing: break;
  }
}

}  // namespace

Tensor apply_unary(UnaryOp op, const Tensor& self, const UnaryArgs& args) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs(native::unary_op_name(op), {self});
    amp::detail::SuspendAutocast suspend;
    return apply_unary(op, in[0], args);
  }
  Tensor out = native::unary(op, self, args);
  if (!out.is_floating_point()) return out;
  if (auto node = record<UnaryOpBackward>({self}, {out}, op, args))
    save_for_backward(*node, op, self, out);
  return out;
}

// In place: self's old history becomes the node's input (edges are taken
// before self gets its new grad_fn), and self its output.
Tensor apply_unary_(UnaryOp op, const Tensor& self, const UnaryArgs& args) {
  if (!autograd::any_requires_grad({&self})) {
    native::unary_(op, self, args);
    return self;
  }
  const std::string name = std::string(native::unary_op_name(op)) + "_";
  autograd::check_inplace(self, name.c_str());
  // A rule on the input needs the value from before the write.
  const Tensor old = saves_of(op) == optable::UnarySaves::kInput ? native::clone(self) : Tensor();
  {
    NoGradGuard no_grad;
    native::unary_(op, self, args);
  }
  auto node = std::make_shared<UnaryOpBackward>(op, args);
  save_for_backward(*node, op, old, self);
  autograd::set_history(node, {self}, {self});
  return self;
}

namespace {

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

// ---- free functions: the table's ops ---------------------------------------------

namespace {
template <typename Op>
UnaryOp id() {
  return native::unary_op<Op>();
}
// op(self), or op applied to self in place when `inplace` (PyTorch's
// functional `inplace=True`).
template <typename Op>
Tensor activation(const Tensor& self, bool inplace, const UnaryArgs& args = {}) {
  return inplace ? apply_unary_(id<Op>(), self, args) : apply_unary(id<Op>(), self, args);
}
}  // namespace

Tensor neg(const Tensor& self) { return apply_unary(id<optable::Neg>(), self); }
Tensor abs(const Tensor& self) { return apply_unary(id<optable::Abs>(), self); }
Tensor sign(const Tensor& self) { return apply_unary(id<optable::Sign>(), self); }
Tensor exp(const Tensor& self) { return apply_unary(id<optable::Exp>(), self); }
Tensor expm1(const Tensor& self) { return apply_unary(id<optable::Expm1>(), self); }
Tensor log(const Tensor& self) { return apply_unary(id<optable::Log>(), self); }
Tensor log1p(const Tensor& self) { return apply_unary(id<optable::Log1p>(), self); }
Tensor sqrt(const Tensor& self) { return apply_unary(id<optable::Sqrt>(), self); }
Tensor rsqrt(const Tensor& self) { return apply_unary(id<optable::Rsqrt>(), self); }
Tensor erf(const Tensor& self) { return apply_unary(id<optable::Erf>(), self); }
Tensor relu(const Tensor& self) { return apply_unary(id<optable::Relu>(), self); }
Tensor sigmoid(const Tensor& self) { return apply_unary(id<optable::Sigmoid>(), self); }
Tensor tanh(const Tensor& self) { return apply_unary(id<optable::Tanh>(), self); }

Tensor relu6(const Tensor& self, bool inplace) { return activation<optable::Relu6>(self, inplace); }
Tensor leaky_relu(const Tensor& self, double negative_slope, bool inplace) {
  return activation<optable::LeakyRelu>(self, inplace, {negative_slope});
}
Tensor elu(const Tensor& self, double alpha, bool inplace) {
  return activation<optable::Elu>(self, inplace, {alpha});
}
Tensor gelu(const Tensor& self, const std::string& approximate) {
  LOOM_CHECK(approximate == "none" || approximate == "tanh",
             "gelu: approximate argument must be either \"none\" or \"tanh\", got \"",
             approximate, "\"");
  return approximate == "tanh" ? apply_unary(id<optable::GeluTanh>(), self)
                               : apply_unary(id<optable::Gelu>(), self);
}
Tensor silu(const Tensor& self, bool inplace) { return activation<optable::Silu>(self, inplace); }
Tensor hardswish(const Tensor& self, bool inplace) {
  return activation<optable::Hardswish>(self, inplace);
}
Tensor hardsigmoid(const Tensor& self, bool inplace) {
  return activation<optable::Hardsigmoid>(self, inplace);
}
Tensor softplus(const Tensor& self, double beta, double threshold) {
  return apply_unary(id<optable::Softplus>(), self, {beta, threshold});
}
Tensor mish(const Tensor& self, bool inplace) { return activation<optable::Mish>(self, inplace); }

Tensor pow(const Tensor& self, Scalar exponent) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("pow", {self});
    amp::detail::SuspendAutocast suspend;
    return pow(in[0], exponent);
  }
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

Tensor& Tensor::relu_() {
  apply_unary_(native::unary_op<optable::Relu>(), *this, {});
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
