#include "nn/modules/Linear.h"

#include <cmath>

#include "autograd/functions/Linalg.h"
#include "nn/Init.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"

namespace loom {
namespace nn {

LinearImpl::LinearImpl(LinearOptions options_) : Cloneable("Linear"), options(options_) {
  LOOM_CHECK(options.in_features_ > 0 && options.out_features_ > 0,
             "Linear: in_features and out_features must be positive, got ",
             options.in_features_, " and ", options.out_features_);
  reset();
}

void LinearImpl::reset() {
  weight = register_parameter("weight", empty({options.out_features_, options.in_features_}));
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (options.bias_) {
    bias = register_parameter("bias", empty({options.out_features_}));
    const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features_));
    init::uniform_(bias, -bound, bound);
  } else {
    bias = Tensor();
  }
}

Tensor LinearImpl::forward(const Tensor& input) {
  LOOM_CHECK(input.defined(), "Linear: the input is undefined");
  LOOM_CHECK(input.dim() >= 1 && input.size(-1) == options.in_features_, "Linear(in_features=",
             options.in_features_, ", out_features=", options.out_features_,
             "): expected input of shape (..., ", options.in_features_, "), got ",
             shape_str(input.sizes()));
  return linear(input, weight, bias);
}

void LinearImpl::pretty_print(std::ostream& out) const {
  out << "Linear(in_features=" << options.in_features_ << ", out_features="
      << options.out_features_ << ", bias=" << (options.bias_ ? "true" : "false") << ")";
}

}  // namespace nn
}  // namespace loom
