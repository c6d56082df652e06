// Pooling layers over (N, C, H, W) or (C, H, W).
#pragma once

#include "nn/Cloneable.h"
#include "nn/ModuleHolder.h"
#include "nn/Options.h"

namespace loom {
namespace nn {

struct MaxPool2dOptions {
  MaxPool2dOptions(ExpandingArray<2> kernel_size)  // NOLINT
      : kernel_size_(kernel_size), stride_(kernel_size) {}
  MaxPool2dOptions& stride(ExpandingArray<2> v) { stride_ = v; return *this; }
  MaxPool2dOptions& padding(ExpandingArray<2> v) { padding_ = v; return *this; }
  MaxPool2dOptions& dilation(ExpandingArray<2> v) { dilation_ = v; return *this; }
  MaxPool2dOptions& ceil_mode(bool v) { ceil_mode_ = v; return *this; }
  ExpandingArray<2> kernel_size_;
  ExpandingArray<2> stride_;
  ExpandingArray<2> padding_ = 0;
  ExpandingArray<2> dilation_ = 1;
  bool ceil_mode_ = false;
};

class MaxPool2dImpl : public Cloneable<MaxPool2dImpl> {
 public:
  explicit MaxPool2dImpl(MaxPool2dOptions options) : Cloneable("MaxPool2d"), options(options) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;
  MaxPool2dOptions options;
};
LOOM_MODULE(MaxPool2d);

struct AvgPool2dOptions {
  AvgPool2dOptions(ExpandingArray<2> kernel_size)  // NOLINT
      : kernel_size_(kernel_size), stride_(kernel_size) {}
  AvgPool2dOptions& stride(ExpandingArray<2> v) { stride_ = v; return *this; }
  AvgPool2dOptions& padding(ExpandingArray<2> v) { padding_ = v; return *this; }
  AvgPool2dOptions& ceil_mode(bool v) { ceil_mode_ = v; return *this; }
  AvgPool2dOptions& count_include_pad(bool v) { count_include_pad_ = v; return *this; }
  ExpandingArray<2> kernel_size_;
  ExpandingArray<2> stride_;
  ExpandingArray<2> padding_ = 0;
  bool ceil_mode_ = false;
  bool count_include_pad_ = true;
};

class AvgPool2dImpl : public Cloneable<AvgPool2dImpl> {
 public:
  explicit AvgPool2dImpl(AvgPool2dOptions options) : Cloneable("AvgPool2d"), options(options) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;
  AvgPool2dOptions options;
};
LOOM_MODULE(AvgPool2d);

class AdaptiveAvgPool2dImpl : public Cloneable<AdaptiveAvgPool2dImpl> {
 public:
  explicit AdaptiveAvgPool2dImpl(ExpandingArray<2> output_size)
      : Cloneable("AdaptiveAvgPool2d"), output_size(output_size) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;
  ExpandingArray<2> output_size;
};
LOOM_MODULE(AdaptiveAvgPool2d);

}  // namespace nn
}  // namespace loom
