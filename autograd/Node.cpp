#include "autograd/Node.h"

#include <atomic>
#include <mutex>

#include "autograd/GradMode.h"
#include "tensor/Factory.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace autograd {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}

Node::Node() : sequence_nr_(g_next_sequence_nr++) {}

std::vector<Tensor> Node::apply_coalesced(const std::vector<Node*>& group,
                                          std::vector<std::vector<Tensor>>&& grads) {
  (void)grads;
  LOOM_FAIL(name(), " cannot run ", group.size(), " nodes as one (it coalesces with none)");
}

// ---- SavedTensor ------------------------------------------------------------------

SavedTensor::SavedTensor(const Tensor& t, bool is_output) {
  if (!t.defined()) return;
  data_ = is_output ? t.detach() : t;
  version_ = t.version();
  defined_ = true;
}

Tensor SavedTensor::unpack(const Node& node) const {
  LOOM_CHECK(!released_, "Trying to backward through the graph a second time (or directly "
             "access saved tensors after they have already been freed) in ", node.name(),
             ". Saved intermediate values of the graph are freed when you call backward(); "
             "pass retain_graph=true if you need to backward through the graph a second time");
  if (!defined_) return Tensor();
  LOOM_CHECK(data_.version() == version_,
             "one of the variables needed for gradient computation has been modified by an "
             "inplace operation: ", data_.describe(), " is at version ", data_.version(),
             "; expected version ", version_, " instead (needed by ", node.name(), ")");
  return data_;
}

void SavedTensor::reset() {
  data_ = Tensor();
  released_ = true;
}

// ---- AccumulateGrad ---------------------------------------------------------------

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  set_device(variable_.device());
  // Run as soon as ready: leaves' gradients (and DDP's hooks) come early.
  set_sequence_nr(UINT64_MAX);
  outputs().push_back({variable_.sizes(), variable_.dtype(), variable_.device()});
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor grad = std::move(grads[0]);
  AutogradMeta& meta = variable_.autograd_meta();
  for (auto& hook : meta.leaf_hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  if (!grad.defined()) return {};
  Tensor existing = variable_.grad();
  if (!existing.defined()) {
    // .grad is laid out as the variable (channels last for a channels-last
    // leaf, else contiguous), as PyTorch's gradient layout contract asks.
    // Steal the buffer when nothing else holds it and it is so laid out;
    // otherwise copy, so two leaves never share one .grad.
    const MemoryFormat format = variable_.suggest_memory_format();
    const bool sole_owner = grad.impl_ptr().use_count() == 1 && grad.storage().use_count() == 1 &&
                            grad.is_contiguous(format) && !grad.requires_grad();
    if (sole_owner) {
      variable_.set_grad(grad.detach());
    } else {
      Tensor copy = empty(grad.sizes(), TensorOptions(grad.dtype()).device(grad.device()), format);
      native::copy_(copy, grad);
      variable_.set_grad(copy);
    }
  } else if (GradMode::is_enabled()) {
    variable_.set_grad(existing + grad);  // create_graph: keep history
  } else {
    existing.add_(grad);
  }
  for (auto& hook : meta.post_accumulate_hooks) hook(variable_);
  return {};
}

// ---- recording helpers ----------------------------------------------------------

bool any_requires_grad(std::initializer_list<const Tensor*> tensors) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : tensors)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& tensors) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : tensors)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  AutogradMeta& meta = leaf.autograd_meta();
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto existing = meta.grad_accumulator.lock()) return existing;
  auto node = std::make_shared<AccumulateGrad>(leaf);
  meta.grad_accumulator = node;
  return node;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (auto fn = t.grad_fn()) return {fn, t.output_nr()};
  return {grad_accumulator(t), 0};
}

void set_history(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
                 const std::vector<Tensor>& outputs) {
  auto& edges = node->next_edges();
  edges.clear();
  for (const Tensor& in : inputs) edges.push_back(gradient_edge(in));
  node->outputs().clear();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    node->outputs().push_back({out.sizes(), out.dtype(), out.device()});
    if (i == 0) node->set_device(out.device());
    AutogradMeta& meta = out.autograd_meta();
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
    meta.requires_grad = false;
  }
}

bool split_off_deferred(Node& node, const std::shared_ptr<Node>& twin, size_t first) {
  auto& edges = node.next_edges();
  if (first >= edges.size() || node.outputs().empty()) return false;
  bool before = false, after = false;
  for (size_t i = 0; i < edges.size(); ++i) (i < first ? before : after) |= edges[i].is_valid();
  if (!before || !after) return false;
  twin->next_edges() = edges;
  for (size_t i = 0; i < first; ++i) twin->next_edges()[i] = Edge();
  for (size_t i = first; i < edges.size(); ++i) edges[i] = Edge();
  twin->outputs() = {node.outputs()[0]};
  twin->set_device(node.device());
  twin->set_sequence_nr(node.sequence_nr());
  twin->set_deferred(true);
  edges.push_back(Edge{twin, 0});
  node.has_deferred_twin_ = true;
  return true;
}

std::vector<Tensor> pass_through(const Node& node, std::vector<Tensor> grads,
                                 const Tensor& grad_output) {
  if (node.has_deferred_twin()) grads.push_back(grad_output);
  return grads;
}

void check_inplace(const Tensor& self, const char* op) {
  if (!GradMode::is_enabled()) return;
  LOOM_CHECK(!(self.is_leaf() && self.requires_grad()), op,
             ": a leaf tensor that requires grad is being used in an in-place operation (",
             self.describe(), "); wrap the update in NoGradGuard or use an out-of-place op");
  const auto& base = self.impl()->view_base;
  if (base && base->autograd && (base->autograd->requires_grad || base->autograd->grad_fn)) {
    LOOM_FAIL(op, ": in-place operation on a view of a tensor that requires grad is not "
              "supported (view ", self.describe(),
              "); use an out-of-place op or clone() the view first");
  }
}

}  // namespace autograd
}  // namespace loom
