#include "nn/modules/Conv.h"

#include <cmath>

#include "autograd/Autocast.h"
#include "autograd/functions/Convolution.h"
#include "nn/Init.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Convolution.h"

namespace loom {
namespace nn {

Conv2dImpl::Conv2dImpl(Conv2dOptions options_) : Cloneable("Conv2d"), options(options_) {
  LOOM_CHECK(options.in_channels_ > 0 && options.out_channels_ > 0 && options.groups_ > 0,
             "Conv2d: channels and groups must be positive, got in_channels=",
             options.in_channels_, " out_channels=", options.out_channels_,
             " groups=", options.groups_);
  LOOM_CHECK(options.in_channels_ % options.groups_ == 0 &&
                 options.out_channels_ % options.groups_ == 0,
             "Conv2d: in_channels (", options.in_channels_, ") and out_channels (",
             options.out_channels_, ") must both be divisible by groups (", options.groups_, ")");
  reset();
}

void Conv2dImpl::reset() {
  weight = register_parameter(
      "weight", empty({options.out_channels_, options.in_channels_ / options.groups_,
                       options.kernel_size_[0], options.kernel_size_[1]}));
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (options.bias_) {
    bias = register_parameter("bias", empty({options.out_channels_}));
    const auto fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    init::uniform_(bias, -bound, bound);
  } else {
    bias = Tensor();
  }
}

Tensor Conv2dImpl::forward(const Tensor& input) {
  LOOM_CHECK(input.defined(), "Conv2d: the input is undefined");
  LOOM_CHECK((input.dim() == 4 || input.dim() == 3) &&
                 input.size(input.dim() - 3) == options.in_channels_,
             "Conv2d(", options.in_channels_, ", ", options.out_channels_,
             "): expected input of shape (N, ", options.in_channels_, ", H, W) or (",
             options.in_channels_, ", H, W), got ", shape_str(input.sizes()));
  return conv2d(input, weight, bias, options.stride_.vec(), options.padding_.vec(),
                options.dilation_.vec(), options.groups_);
}

bool Conv2dImpl::runs_channels_last(const Tensor& input) const {
  if (!input.defined() || input.dim() != 4 || !input.is_floating_point()) return false;
  const DeviceType type = input.device().type;
  // Autocast lowers convolutions of float32 (not float64) inputs.
  const DType dtype = amp::is_autocast_enabled(type) && input.dtype() != kFloat64
                          ? amp::get_autocast_dtype(type)
                          : input.dtype();
  return native::conv2d_prefers_channels_last(input.device(), dtype, input.sizes(),
                                              weight.sizes(), options.stride_.vec(),
                                              options.padding_.vec(), options.dilation_.vec(),
                                              options.groups_);
}

void Conv2dImpl::pretty_print(std::ostream& out) const {
  out << "Conv2d(" << options.in_channels_ << ", " << options.out_channels_
      << ", kernel_size=" << options.kernel_size_ << ", stride=" << options.stride_;
  if (options.padding_.vec() != std::vector<int64_t>{0, 0}) out << ", padding=" << options.padding_;
  if (options.dilation_.vec() != std::vector<int64_t>{1, 1})
    out << ", dilation=" << options.dilation_;
  if (options.groups_ != 1) out << ", groups=" << options.groups_;
  if (!options.bias_) out << ", bias=false";
  out << ")";
}

}  // namespace nn
}  // namespace loom
