// group_norm: forward through native::group_norm (which returns the (N, G)
// statistics), backward through native::group_norm_backward with them.
//
// Under create_graph (grad mode on inside backward) the gradients are written
// with differentiable ops instead, on the input seen as (N, G, D * HxW) so a
// group is one row, recomputing the statistics from the saved input:
//   x_hat = (x - mean) * rstd,  g = dy * w[c]
//   dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))   (means over a group)
//   dw[c] = sum(dy * x_hat),  db[c] = sum(dy)              (over all dims but C)
#include <algorithm>
#include "autograd/Autocast.h"

#include "autograd/GradMode.h"
#include "autograd/functions/Normalization.h"
#include "autograd/functions/Record.h"
#include "tensor/native/GroupNorm.h"

namespace loom {

using autograd::GradMode;
using autograd::Node;
using autograd::record;
using autograd::SavedTensor;

namespace {

// Inputs (input, weight, bias).
class GroupNormBackward final : public Node {
 public:
  GroupNormBackward(int64_t num_groups, double eps) : num_groups_(num_groups), eps_(eps) {}
  std::string name() const override { return "GroupNormBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor x = input.unpack(*this);
    const Tensor w = weight.defined() ? weight.unpack(*this) : Tensor();
    if (GradMode::is_enabled()) return differentiable_backward(grads[0], x, w);
    auto [gi, gw, gb] = native::group_norm_backward(
        grads[0], x, mean, rstd, w, num_groups_,
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
  Tensor mean, rstd;  // the forward's (N, G) statistics, owned by this node only

 private:
  std::vector<Tensor> differentiable_backward(const Tensor& dy, const Tensor& x,
                                              const Tensor& w) const {
    const int64_t N = x.size(0), C = x.size(1);
    const IntList rows = {N, num_groups_, x.numel() / std::max<int64_t>(N * num_groups_, 1)};
    IntList channel_view(x.dim(), 1), other_dims;  // w as (1, C, 1, ...); dims but C
    channel_view[1] = C;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (d != 1) other_dims.push_back(d);
    const Tensor xr = x.reshape(rows);
    const Tensor xc = xr - xr.mean({2}, true);
    const Tensor rs = ((xc * xc).mean({2}, true) + eps_).rsqrt();
    const Tensor x_hat_rows = xc * rs;  // (N, G, D * HxW)
    const Tensor x_hat = x_hat_rows.reshape(x.sizes());
    Tensor gi, gw, gb;
    if (needs_input_grad(0)) {
      const Tensor g = (w.defined() ? dy * w.reshape(channel_view) : dy).reshape(rows);
      gi = (rs * (g - g.mean({2}, true) - x_hat_rows * (g * x_hat_rows).mean({2}, true)))
               .reshape(x.sizes());
    }
    if (needs_input_grad(1)) gw = (dy * x_hat).sum(other_dims);
    if (needs_input_grad(2)) gb = dy.sum(other_dims);
    return {gi, gw, gb};
  }

  int64_t num_groups_;
  double eps_;
};

}  // namespace

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("group_norm", {input, weight, bias});
    amp::detail::SuspendAutocast suspend;
    return group_norm(in[0], num_groups, in[1], in[2], eps);
  }
  auto [out, mean, rstd] = native::group_norm(input, num_groups, weight, bias, eps);
  if (auto node = record<GroupNormBackward>({input, weight, bias}, {out}, num_groups, eps)) {
    node->input = SavedTensor(input, false);
    if (weight.defined()) node->weight = SavedTensor(weight, false);
    node->mean = mean;
    node->rstd = rstd;
  }
  return out;
}

}  // namespace loom
