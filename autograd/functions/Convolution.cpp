// conv2d: forward through native::conv2d, backward through the dedicated
// kernels of native::conv2d_backward (one pass computes all three gradients).
#include "autograd/functions/Convolution.h"

#include "autograd/functions/Record.h"
#include "tensor/native/Convolution.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;

namespace {

// Inputs (input, weight, bias).
class Conv2dBackward final : public Node {
 public:
  Conv2dBackward(IntList stride, IntList padding, IntList dilation, int64_t groups)
      : stride_(std::move(stride)),
        padding_(std::move(padding)),
        dilation_(std::move(dilation)),
        groups_(groups) {}
  std::string name() const override { return "Conv2dBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor gi, gw, gb;
    native::conv2d_backward(grads[0], input.unpack(*this), weight.unpack(*this), stride_,
                            padding_, dilation_, groups_, needs_input_grad(0),
                            needs_input_grad(1), needs_input_grad(2), gi, gw, gb);
    return {gi, gw, gb};
  }
  void release_saved() override {
    input.reset();
    weight.reset();
  }
  SavedTensor input, weight;

 private:
  IntList stride_, padding_, dilation_;
  int64_t groups_;
};

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntList stride,
              IntList padding, IntList dilation, int64_t groups) {
  Tensor out = native::conv2d(input, weight, bias, stride, padding, dilation, groups);
  if (auto node = record<Conv2dBackward>({input, weight, bias}, {out}, stride, padding,
                                         dilation, groups)) {
    node->input = SavedTensor(input, false);
    node->weight = SavedTensor(weight, false);
  }
  return out;
}

}  // namespace loom
