#include "nn/modules/Pooling.h"

#include "autograd/functions/Pooling.h"

namespace loom {
namespace nn {

Tensor MaxPool2dImpl::forward(const Tensor& input) {
  return max_pool2d(input, options.kernel_size_.vec(), options.stride_.vec(),
                    options.padding_.vec(), options.dilation_.vec(), options.ceil_mode_);
}

void MaxPool2dImpl::pretty_print(std::ostream& out) const {
  out << "MaxPool2d(kernel_size=" << options.kernel_size_ << ", stride=" << options.stride_
      << ", padding=" << options.padding_ << ", dilation=" << options.dilation_
      << ", ceil_mode=" << (options.ceil_mode_ ? "true" : "false") << ")";
}

Tensor AvgPool2dImpl::forward(const Tensor& input) {
  return avg_pool2d(input, options.kernel_size_.vec(), options.stride_.vec(),
                    options.padding_.vec(), options.ceil_mode_, options.count_include_pad_);
}

void AvgPool2dImpl::pretty_print(std::ostream& out) const {
  out << "AvgPool2d(kernel_size=" << options.kernel_size_ << ", stride=" << options.stride_
      << ", padding=" << options.padding_ << ")";
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& input) {
  return adaptive_avg_pool2d(input, output_size.vec());
}

void AdaptiveAvgPool2dImpl::pretty_print(std::ostream& out) const {
  out << "AdaptiveAvgPool2d(output_size=" << output_size << ")";
}

}  // namespace nn
}  // namespace loom
