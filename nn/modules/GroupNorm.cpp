#include "nn/modules/GroupNorm.h"

#include "autograd/functions/Normalization.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace nn {

GroupNormImpl::GroupNormImpl(GroupNormOptions options_)
    : Cloneable("GroupNorm"), options(options_) {
  LOOM_CHECK(options.num_groups_ > 0 && options.num_channels_ > 0,
             "GroupNorm: num_groups and num_channels must be positive, got ", options.num_groups_,
             " and ", options.num_channels_);
  LOOM_CHECK(options.num_channels_ % options.num_groups_ == 0,
             "GroupNorm: num_channels must be divisible by num_groups, got num_channels=",
             options.num_channels_, " and num_groups=", options.num_groups_);
  reset();
}

void GroupNormImpl::reset() {
  if (options.affine_) {
    weight = register_parameter("weight", ones({options.num_channels_}));
    bias = register_parameter("bias", zeros({options.num_channels_}));
  } else {
    weight = bias = Tensor();
  }
}

void GroupNormImpl::reset_parameters() {
  if (!options.affine_) return;
  autograd::NoGradGuard no_grad;
  native::fill_(weight, 1);
  native::fill_(bias, 0);
}

Tensor GroupNormImpl::forward(const Tensor& input) {
  LOOM_CHECK(input.defined(), "GroupNorm: the input is undefined");
  LOOM_CHECK(input.dim() >= 2 && input.size(1) == options.num_channels_, "GroupNorm(",
             options.num_groups_, ", ", options.num_channels_,
             "): expected input of shape (N, C, *) with C = ", options.num_channels_, ", got ",
             shape_str(input.sizes()));
  return group_norm(input, options.num_groups_, weight, bias, options.eps_);
}

void GroupNormImpl::pretty_print(std::ostream& out) const {
  out << "GroupNorm(" << options.num_groups_ << ", " << options.num_channels_
      << ", eps=" << options.eps_ << ", affine=" << (options.affine_ ? "true" : "false") << ")";
}

}  // namespace nn
}  // namespace loom
