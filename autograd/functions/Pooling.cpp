// Pooling: forward through native/Pooling, backward through its dedicated
// kernels.  Nodes keep only what the backward needs: the input's shape, the
// window arguments and, for max pooling, the argmax indices (never the input
// itself).
#include "autograd/functions/Pooling.h"

#include "autograd/functions/Record.h"
#include "tensor/native/Pooling.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;

namespace {

class MaxPool2dBackward final : public Node {
 public:
  MaxPool2dBackward(IntList input_sizes, IntList kernel_size, IntList stride, IntList padding,
                    IntList dilation, bool ceil_mode)
      : input_sizes_(std::move(input_sizes)),
        kernel_size_(std::move(kernel_size)),
        stride_(std::move(stride)),
        padding_(std::move(padding)),
        dilation_(std::move(dilation)),
        ceil_mode_(ceil_mode) {}
  std::string name() const override { return "MaxPool2dBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {native::max_pool2d_backward(grads[0], input_sizes_, kernel_size_, stride_, padding_,
                                        dilation_, ceil_mode_, indices.unpack(*this))};
  }
  void release_saved() override { indices.reset(); }
  SavedTensor indices;

 private:
  IntList input_sizes_, kernel_size_, stride_, padding_, dilation_;
  bool ceil_mode_;
};

class AvgPool2dBackward final : public Node {
 public:
  AvgPool2dBackward(IntList input_sizes, IntList kernel_size, IntList stride, IntList padding,
                    bool ceil_mode, bool count_include_pad)
      : input_sizes_(std::move(input_sizes)),
        kernel_size_(std::move(kernel_size)),
        stride_(std::move(stride)),
        padding_(std::move(padding)),
        ceil_mode_(ceil_mode),
        count_include_pad_(count_include_pad) {}
  std::string name() const override { return "AvgPool2dBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {native::avg_pool2d_backward(grads[0], input_sizes_, kernel_size_, stride_, padding_,
                                        ceil_mode_, count_include_pad_)};
  }

 private:
  IntList input_sizes_, kernel_size_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
};

class AdaptiveAvgPool2dBackward final : public Node {
 public:
  explicit AdaptiveAvgPool2dBackward(IntList input_sizes)
      : input_sizes_(std::move(input_sizes)) {}
  std::string name() const override { return "AdaptiveAvgPool2dBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {native::adaptive_avg_pool2d_backward(grads[0], input_sizes_)};
  }

 private:
  IntList input_sizes_;
};

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntList kernel_size,
                                                   IntList stride, IntList padding,
                                                   IntList dilation, bool ceil_mode) {
  auto [out, indices] =
      native::max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode);
  if (auto node = record<MaxPool2dBackward>({input}, {out}, input.sizes(), kernel_size, stride,
                                            padding, dilation, ceil_mode))
    node->indices = SavedTensor(indices, false);
  return {out, indices};
}

Tensor max_pool2d(const Tensor& input, IntList kernel_size, IntList stride, IntList padding,
                  IntList dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& input, IntList kernel_size, IntList stride, IntList padding,
                  bool ceil_mode, bool count_include_pad) {
  Tensor out =
      native::avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad);
  record<AvgPool2dBackward>({input}, {out}, input.sizes(), kernel_size, stride, padding,
                            ceil_mode, count_include_pad);
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& input, IntList output_size) {
  Tensor out = native::adaptive_avg_pool2d(input, output_size);
  record<AdaptiveAvgPool2dBackward>({input}, {out}, input.sizes());
  return out;
}

}  // namespace loom
