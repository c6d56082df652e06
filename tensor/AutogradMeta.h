// AutogradMeta: the autograd fields of a tensor, as plain data.
//
// The tensor layer only stores them; what they mean (graph nodes, the engine,
// hooks) lives in autograd/.  A tensor without this struct never requires grad.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace loom {

class Tensor;
namespace autograd {
class Node;
}

struct AutogradMeta {
  bool requires_grad = false;  // meaningful for leaves; non-leaves have grad_fn
  bool retains_grad = false;
  // The accumulated gradient of a leaf (or of a non-leaf that retains grad).
  std::shared_ptr<struct TensorImpl> grad;
  // The node that produced this tensor, and which of its outputs it is.
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  // The AccumulateGrad node of a leaf, created on first use.
  std::weak_ptr<autograd::Node> grad_accumulator;
  // Hooks on a leaf's incoming gradient (may replace it), and hooks run after
  // the gradient was accumulated into .grad (DDP's bucket trigger).
  std::vector<std::function<Tensor(const Tensor&)>> leaf_hooks;
  std::vector<std::function<void(Tensor&)>> post_accumulate_hooks;
};

}  // namespace loom
