#include "nn/modules/Activation.h"

#include "autograd/functions/Elementwise.h"
#include "autograd/functions/Loss.h"

namespace loom {
namespace nn {

Tensor ReLUImpl::forward(const Tensor& input) {
  if (inplace_) {
    Tensor t = input;
    return t.relu_();
  }
  return relu(input);
}

void ReLUImpl::pretty_print(std::ostream& out) const {
  out << "ReLU(" << (inplace_ ? "inplace=true" : "") << ")";
}

Tensor LeakyReLUImpl::forward(const Tensor& input) {
  return leaky_relu(input, options.negative_slope_, options.inplace_);
}
void LeakyReLUImpl::pretty_print(std::ostream& out) const {
  out << "LeakyReLU(negative_slope=" << options.negative_slope_
      << (options.inplace_ ? ", inplace=true" : "") << ")";
}

Tensor ELUImpl::forward(const Tensor& input) {
  return elu(input, options.alpha_, options.inplace_);
}
void ELUImpl::pretty_print(std::ostream& out) const {
  out << "ELU(alpha=" << options.alpha_ << (options.inplace_ ? ", inplace=true" : "") << ")";
}

GELUImpl::GELUImpl(GELUOptions options_) : Cloneable("GELU"), options(std::move(options_)) {
  LOOM_CHECK(options.approximate_ == "none" || options.approximate_ == "tanh",
             "GELU: approximate must be \"none\" or \"tanh\", got \"", options.approximate_,
             "\"");
}
Tensor GELUImpl::forward(const Tensor& input) { return gelu(input, options.approximate_); }
void GELUImpl::pretty_print(std::ostream& out) const {
  out << "GELU(approximate='" << options.approximate_ << "')";
}

Tensor SoftplusImpl::forward(const Tensor& input) {
  return softplus(input, options.beta_, options.threshold_);
}
void SoftplusImpl::pretty_print(std::ostream& out) const {
  out << "Softplus(beta=" << options.beta_ << ", threshold=" << options.threshold_ << ")";
}

Tensor FlattenImpl::forward(const Tensor& input) {
  return input.flatten(options.start_dim_, options.end_dim_);
}

void FlattenImpl::pretty_print(std::ostream& out) const {
  out << "Flatten(start_dim=" << options.start_dim_ << ", end_dim=" << options.end_dim_ << ")";
}

DropoutImpl::DropoutImpl(double p_) : Cloneable("Dropout"), p(p_) {
  LOOM_CHECK(p >= 0 && p <= 1, "Dropout: probability has to be between 0 and 1, but got ", p);
}

Tensor DropoutImpl::forward(const Tensor& input) { return dropout(input, p, is_training()); }

void DropoutImpl::pretty_print(std::ostream& out) const { out << "Dropout(p=" << p << ")"; }

}  // namespace nn
}  // namespace loom
