// conv2d: forward through native::conv2d, backward through the dedicated
// kernels of native::conv2d_backward (one pass computes all three gradients).
#include "autograd/functions/Convolution.h"

#include <algorithm>

#include "autograd/Autocast.h"

#include "autograd/DeferWeightGrad.h"
#include "autograd/functions/Record.h"
#include "tensor/WeightReuse.h"
#include "tensor/native/Convolution.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;

namespace {

// Inputs (input, weight, bias); the deferred twin of a split backward
// (autograd/DeferWeightGrad.h) computes the weight and bias gradients.
class Conv2dBackward final : public Node {
 public:
  Conv2dBackward(IntList stride, IntList padding, IntList dilation, int64_t groups)
      : stride_(std::move(stride)),
        padding_(std::move(padding)),
        dilation_(std::move(dilation)),
        groups_(groups) {}
  std::string name() const override {
    return is_deferred() ? "Conv2dWeightBackward" : "Conv2dBackward";
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    WeightReuseGuard reuse(reuses_weights);
    Tensor gi, gw, gb;
    native::conv2d_backward(grads[0], input.unpack(*this), weight.unpack(*this), stride_,
                            padding_, dilation_, groups_, needs_input_grad(0),
                            needs_input_grad(1), needs_input_grad(2), gi, gw, gb);
    return autograd::pass_through(*this, {gi, gw, gb}, grads[0]);
  }
  // Twins of one layer (same weight and geometry, inputs differing only in
  // batch size): their weight gradients are one product over the images of
  // all of them -- where that is faster than one product per micro-batch.
  // Stacking costs the copy of the inputs and output gradients into one
  // buffer and, for each new group size, a new shape for the kernels' timed
  // choice; not stacking costs a weight-sized gradient per micro-batch,
  // written and then added into the sum (AccumulateGrad).  So:
  // - a filter larger than 1x1 stacks while its product is short (below
  //   kCoalesceBelowPixels output pixels a micro-batch): then stacking lets
  //   3x3 filters take Winograd's weight gradient (2x faster at 32 images of
  //   8x8); from there on a micro-batch's product is as fast per image alone;
  // - a 1x1 filter (a plain matrix product, as fast per image alone down to
  //   4 images of 4x4: ResNet-50's layers at 4 images and 128x128 input on
  //   Zen 5, bench/conv_backends) stacks where a micro-batch's input and
  //   output gradient together are no larger than the weight: the copies
  //   then cost less than the per-micro-batch sums (ResNet-50's last stage
  //   at 4x4: a fifth of the weight).
  bool coalesces_with(const Node& other) const override {
    const auto* o = dynamic_cast<const Conv2dBackward*>(&other);
    if (o == nullptr || !is_deferred() || !o->is_deferred() || o->stride_ != stride_ ||
        o->padding_ != padding_ || o->dilation_ != dilation_ || o->groups_ != groups_)
      return false;
    const Tensor x = input.unpack(*this), y = o->input.unpack(*o), w = weight.unpack(*this);
    if (w.dim() != 4 || !autograd::stacks_along_batch(x, y, 4)) return false;
    if (w.size(2) * w.size(3) == 1)
      return activations(x) <= w.numel() && activations(y) <= w.numel();
    return output_pixels(x) < kCoalesceBelowPixels && output_pixels(y) < kCoalesceBelowPixels;
  }
  std::vector<Tensor> apply_coalesced(const std::vector<Node*>& group,
                                      std::vector<std::vector<Tensor>>&& grads) override {
    const auto [x, go] = autograd::stacked_inputs_and_grads<Conv2dBackward>(group, grads);
    Tensor gi, gw, gb;
    native::conv2d_backward(go, x, weight.unpack(*this), stride_, padding_, dilation_, groups_,
                            false, needs_input_grad(1), needs_input_grad(2), gi, gw, gb);
    return {Tensor(), gw, gb};
  }
  void release_saved() override {
    input.reset();
    weight.reset();
  }
  static constexpr int64_t kCoalesceBelowPixels = 1024;
  // Images x output rows x output columns of forward input x (4-D).
  int64_t output_pixels(const Tensor& x) const {
    const Tensor w = weight.unpack(*this);
    if (x.dim() != 4 || w.dim() != 4) return 0;
    // conv2d takes one value for both dimensions, or one per dimension.
    auto at = [](const IntList& v, int d) { return v.size() == 1 ? v[0] : v[d]; };
    auto extent = [&](int64_t size, int d) {
      const int64_t span = at(dilation_, d) * (w.size(2 + d) - 1) + 1;
      return std::max<int64_t>((size + 2 * at(padding_, d) - span) / at(stride_, d) + 1, 1);
    };
    return x.size(0) * extent(x.size(2), 0) * extent(x.size(3), 1);
  }
  // Elements of forward input x and of its output (or output gradient).
  int64_t activations(const Tensor& x) const {
    return x.numel() + output_pixels(x) * weight.unpack(*this).size(0);
  }
  SavedTensor input, weight;
  // Recorded under WeightReuse (tensor/WeightReuse.h): the backward reads
  // the weights under it too.
  bool reuses_weights = false;

 private:
  IntList stride_, padding_, dilation_;
  int64_t groups_;
};

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntList stride,
              IntList padding, IntList dilation, int64_t groups) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("conv2d", {input, weight, bias});
    amp::detail::SuspendAutocast suspend;
    return conv2d(in[0], in[1], in[2], stride, padding, dilation, groups);
  }
  Tensor out = native::conv2d(input, weight, bias, stride, padding, dilation, groups);
  if (auto node = record<Conv2dBackward>({input, weight, bias}, {out}, stride, padding,
                                         dilation, groups)) {
    node->input = SavedTensor(input, false);
    node->weight = SavedTensor(weight, false);
    node->reuses_weights = WeightReuse::is_enabled();
    if (autograd::DeferWeightGrad::is_enabled()) {
      auto twin = std::make_shared<Conv2dBackward>(stride, padding, dilation, groups);
      twin->input = node->input;
      twin->weight = node->weight;
      autograd::split_off_deferred(*node, twin, 1);
    }
  }
  return out;
}

}  // namespace loom
