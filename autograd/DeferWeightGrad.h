// Deferred weight gradients: the B/W split of zero-bubble pipeline
// parallelism (Qi et al., 2023, "Zero Bubble Pipeline Parallelism").
//
// While a DeferWeightGradGuard is alive on a thread (and in the closures that
// thread submits to streams, which carry the mode like GradMode), conv2d and
// linear record their backward as two nodes when both the input and a weight
// (or bias) need a gradient:
//
//   the input node     computes the input gradient and passes the output
//                      gradient on to
//   the weight node    a *deferred* node computing the weight and bias
//                      gradients (then AccumulateGrad as usual).
//
// The engine runs a deferred node only when no other node of its device is
// ready, of this or of another backward pass running at the same time
// (autograd/Engine.cpp).  In a micro-batch pipeline the last stage's
// device therefore hands every micro-batch's input gradient to the stage
// before it first, and computes its weight gradients in the time it would
// otherwise wait for that stage to drain: the drain bubble mostly disappears.
// Results are the same products, accumulated in another order.  The price is
// memory: a weight node keeps its output gradient and the saved input until
// it runs, at the latest at the end of the backward pass, so a single-device
// model gains nothing from it and should not use it.
#pragma once

#include <utility>
#include <vector>

#include "autograd/Node.h"
#include "tensor/ThreadLocalMode.h"

namespace loom {
namespace autograd {

struct DeferWeightGrad : ThreadLocalMode<DeferWeightGrad, /*kEnabledByDefault=*/false> {};

// Records split (deferred) weight gradients until the end of the scope.
class DeferWeightGradGuard : public ModeGuard<DeferWeightGrad> {
 public:
  explicit DeferWeightGradGuard(bool enabled = true) : ModeGuard(enabled) {}
};

// ---- for ops whose weight halves coalesce (Node::apply_coalesced) -------------

// Whether two weight halves' saved inputs stack along dim 0 (micro-batches
// side by side): the same rank (at least min_dim), dtype, device and sizes
// past dim 0.
bool stacks_along_batch(const Tensor& a, const Tensor& b, int64_t min_dim);

// Tensors concatenated along dim 0.
Tensor cat_batches(const std::vector<Tensor>& tensors);

// {the group's saved inputs, their output gradients}, each concatenated
// along dim 0.  NodeT keeps its forward input as SavedTensor `input`;
// grads[k][0] is group[k]'s output gradient.
template <typename NodeT>
std::pair<Tensor, Tensor> stacked_inputs_and_grads(const std::vector<Node*>& group,
                                                   const std::vector<std::vector<Tensor>>& grads) {
  std::vector<Tensor> inputs, grad_outputs;
  for (size_t k = 0; k < group.size(); ++k) {
    const auto& node = static_cast<const NodeT&>(*group[k]);
    inputs.push_back(node.input.unpack(node));
    grad_outputs.push_back(grads[k][0]);
  }
  return {cat_batches(inputs), cat_batches(grad_outputs)};
}

}  // namespace autograd
}  // namespace loom
