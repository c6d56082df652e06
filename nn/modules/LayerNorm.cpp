#include "nn/modules/LayerNorm.h"

#include "autograd/functions/Normalization.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace nn {

LayerNormImpl::LayerNormImpl(LayerNormOptions options_)
    : Cloneable("LayerNorm"), options(std::move(options_)) {
  bool positive = !options.normalized_shape_.empty();
  for (int64_t d : options.normalized_shape_) positive = positive && d > 0;
  LOOM_CHECK(positive, "LayerNorm: normalized_shape must be non-empty with positive sizes, got ",
             shape_str(options.normalized_shape_));
  reset();
}

void LayerNormImpl::reset() {
  if (options.elementwise_affine_) {
    weight = register_parameter("weight", ones(options.normalized_shape_));
    bias = register_parameter("bias", zeros(options.normalized_shape_));
  } else {
    weight = bias = Tensor();
  }
}

void LayerNormImpl::reset_parameters() {
  if (!options.elementwise_affine_) return;
  autograd::NoGradGuard no_grad;
  native::fill_(weight, 1);
  native::fill_(bias, 0);
}

Tensor LayerNormImpl::forward(const Tensor& input) {
  LOOM_CHECK(input.defined(), "LayerNorm: the input is undefined");
  const IntList& shape = options.normalized_shape_;
  const int64_t axis = input.dim() - static_cast<int64_t>(shape.size());
  bool match = axis >= 0;
  for (size_t k = 0; match && k < shape.size(); ++k)
    match = input.size(axis + static_cast<int64_t>(k)) == shape[k];
  LOOM_CHECK(match, "LayerNorm(", shape_str(shape), "): expected input of shape [*, ",
             shape_str(shape).substr(1), ", got ", shape_str(input.sizes()));
  return layer_norm(input, shape, weight, bias, options.eps_);
}

void LayerNormImpl::pretty_print(std::ostream& out) const {
  out << "LayerNorm(" << shape_str(options.normalized_shape_) << ", eps=" << options.eps_
      << ", elementwise_affine=" << (options.elementwise_affine_ ? "true" : "false") << ")";
}

}  // namespace nn
}  // namespace loom
