// How a differentiable op records itself:
//
//   Tensor out = native::foo(a, b);                 // compute, no graph
//   if (auto node = record<FooBackward>({a, b}, {out})) {
//     node->a = SavedTensor(a, false);              // what backward needs
//   }
//   return out;
//
// record() returns null (and records nothing) when grad mode is off or no
// input requires grad, so the forward pays nothing for inference.
#pragma once

#include <memory>
#include <vector>

#include "autograd/GradMode.h"
#include "autograd/Node.h"

namespace loom {
namespace autograd {

template <typename NodeT, typename... Args>
std::shared_ptr<NodeT> record(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                              Args&&... args) {
  if (!any_requires_grad(inputs)) return nullptr;
  auto node = std::make_shared<NodeT>(std::forward<Args>(args)...);
  set_history(node, inputs, outputs);
  return node;
}

}  // namespace autograd
}  // namespace loom
