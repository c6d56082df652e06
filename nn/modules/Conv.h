// nn::Conv2d over (N, C, H, W) (or (C, H, W)) inputs.  weight
// (out, in / groups, kH, kW), bias (out); PyTorch's default init.
#pragma once

#include "nn/Cloneable.h"
#include "nn/ModuleHolder.h"
#include "nn/Options.h"

namespace loom {
namespace nn {

struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  Conv2dOptions& stride(ExpandingArray<2> v) { stride_ = v; return *this; }
  Conv2dOptions& padding(ExpandingArray<2> v) { padding_ = v; return *this; }
  Conv2dOptions& dilation(ExpandingArray<2> v) { dilation_ = v; return *this; }
  Conv2dOptions& groups(int64_t v) { groups_ = v; return *this; }
  Conv2dOptions& bias(bool v) { bias_ = v; return *this; }
  int64_t in_channels_;
  int64_t out_channels_;
  ExpandingArray<2> kernel_size_;
  ExpandingArray<2> stride_ = 1;
  ExpandingArray<2> padding_ = 0;
  ExpandingArray<2> dilation_ = 1;
  int64_t groups_ = 1;
  bool bias_ = true;
};

class Conv2dImpl : public Cloneable<Conv2dImpl> {
 public:
  Conv2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv2dImpl(Conv2dOptions options);
  void reset() override;
  // Throws naming the layer and shapes when the input's channels differ.
  Tensor forward(const Tensor& input) override;
  // Whether this layer would run on channels-last activations for a batch
  // like `input` (in autocast's dtype inside an autocast region): then a
  // model converts its input once, input.contiguous(MemoryFormat::
  // kChannelsLast), and its activations stay so (loom's ResNets do).
  bool runs_channels_last(const Tensor& input) const;
  void pretty_print(std::ostream& out) const override;

  Conv2dOptions options;
  Tensor weight;  // (out, in / groups, kH, kW)
  Tensor bias;    // (out) or undefined
};
LOOM_MODULE(Conv2d);

}  // namespace nn
}  // namespace loom
