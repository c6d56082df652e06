#include "nn/modules/Loss.h"

namespace loom {
namespace nn {

CrossEntropyLossImpl::CrossEntropyLossImpl(CrossEntropyLossOptions options_)
    : Cloneable("CrossEntropyLoss"), options(std::move(options_)) {
  reset();
}

void CrossEntropyLossImpl::reset() {
  // A buffer of its own (a copy), which forward uses: clone() rebuilds with
  // reset() and must not share the weight with the original.
  if (options.weight_.defined())
    options.weight_ = register_buffer("weight", options.weight_.detach().clone());
}

Tensor CrossEntropyLossImpl::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, options.reduction_, options.ignore_index_,
                       options.label_smoothing_, options.weight_);
}

void CrossEntropyLossImpl::pretty_print(std::ostream& out) const { out << "CrossEntropyLoss()"; }

NLLLossImpl::NLLLossImpl(NLLLossOptions options_) : Cloneable("NLLLoss"), options(std::move(options_)) {
  reset();
}

void NLLLossImpl::reset() {
  // A buffer of its own (a copy), which forward uses: clone() rebuilds with
  // reset() and must not share the weight with the original.
  if (options.weight_.defined())
    options.weight_ = register_buffer("weight", options.weight_.detach().clone());
}

Tensor NLLLossImpl::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, options.reduction_, options.ignore_index_, options.weight_);
}

Tensor MSELossImpl::forward(const Tensor& input, const Tensor& target) {
  return mse_loss(input, target, reduction);
}

}  // namespace nn
}  // namespace loom
