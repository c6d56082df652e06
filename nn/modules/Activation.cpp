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
