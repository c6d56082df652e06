// layer_norm: forward through native::layer_norm (which returns the row
// statistics), backward through native::layer_norm_backward with them.
//
// Under create_graph (grad mode on inside backward) the gradients are written
// with differentiable ops instead, recomputing the statistics from the saved
// input, so a second derivative sees how they depend on it:
//   x_hat = (x - mean) * rstd,  g = dy * w
//   dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))   (means over the
//        normalised dims)
//   dw = sum(dy * x_hat),  db = sum(dy)                    (sums over the others)
#include "autograd/GradMode.h"
#include "autograd/Autocast.h"
#include "autograd/functions/Normalization.h"
#include "autograd/functions/Record.h"
#include "tensor/native/LayerNorm.h"

namespace loom {

using autograd::GradMode;
using autograd::Node;
using autograd::record;
using autograd::SavedTensor;

namespace {

// Inputs (input, weight, bias).
class LayerNormBackward final : public Node {
 public:
  LayerNormBackward(IntList normalized_shape, double eps)
      : normalized_shape_(std::move(normalized_shape)), eps_(eps) {}
  std::string name() const override { return "LayerNormBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor x = input.unpack(*this);
    const Tensor w = weight.defined() ? weight.unpack(*this) : Tensor();
    if (GradMode::is_enabled()) return differentiable_backward(grads[0], x, w);
    auto [gi, gw, gb] = native::layer_norm_backward(
        grads[0], x, normalized_shape_, mean, rstd, w,
        {needs_input_grad(0), needs_input_grad(1), needs_input_grad(2)});
    return {gi, gw, gb};
  }
  void release_saved() override {
    input.reset();
    weight.reset();
    mean = Tensor();
    rstd = Tensor();
  }
  SavedTensor input, weight;
  Tensor mean, rstd;  // the forward's statistics, owned by this node only

 private:
  std::vector<Tensor> differentiable_backward(const Tensor& dy, const Tensor& x,
                                              const Tensor& w) const {
    const int64_t axis = x.dim() - static_cast<int64_t>(normalized_shape_.size());
    IntList dims, batch_dims;
    for (int64_t d = 0; d < x.dim(); ++d) (d < axis ? batch_dims : dims).push_back(d);
    const Tensor xc = x - x.mean(dims, true);
    const Tensor rs = ((xc * xc).mean(dims, true) + eps_).rsqrt();
    const Tensor x_hat = xc * rs;
    Tensor gi, gw, gb;
    if (needs_input_grad(0)) {
      const Tensor g = w.defined() ? dy * w : dy;
      gi = rs * (g - g.mean(dims, true) - x_hat * (g * x_hat).mean(dims, true));
    }
    // An empty batch_dims list would mean "all dims" to sum.
    if (needs_input_grad(1)) gw = batch_dims.empty() ? dy * x_hat : (dy * x_hat).sum(batch_dims);
    if (needs_input_grad(2)) gb = batch_dims.empty() ? dy : dy.sum(batch_dims);
    return {gi, gw, gb};
  }

  IntList normalized_shape_;
  double eps_;
};

}  // namespace

Tensor layer_norm(const Tensor& input, const IntList& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("layer_norm", {input, weight, bias});
    amp::detail::SuspendAutocast suspend;
    return layer_norm(in[0], normalized_shape, in[1], in[2], eps);
  }
  auto [out, mean, rstd] = native::layer_norm(input, normalized_shape, weight, bias, eps);
  if (auto node = record<LayerNormBackward>({input, weight, bias}, {out}, normalized_shape, eps)) {
    node->input = SavedTensor(input, false);
    if (weight.defined()) node->weight = SavedTensor(weight, false);
    node->mean = mean;
    node->rstd = rstd;
  }
  return out;
}

}  // namespace loom
