// Node (a grad_fn): one recorded op's backward rule, with edges to the nodes
// that produced its inputs.  micrograd's shape: saved inputs plus a rule.
//
// A node has one incoming gradient per forward output and returns one
// gradient per forward input (next edge); an undefined Tensor means "no
// gradient".  The engine fills undefined incoming gradients with zeros, so
// rules never see them.  Nodes run on the thread of their device.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/Tensor.h"

namespace loom {
namespace autograd {

class Node;

// Where a gradient goes: input slot `input_nr` of `node`.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool is_valid() const { return node != nullptr; }
};

// Shape, dtype and device of one forward output, to check and zero-fill its gradient.
struct OutputMeta {
  IntList sizes;
  DType dtype = kFloat32;
  Device device;
};

// The priority of a node that hands a gradient to another device (the
// backward of a cross-device to() or copy_()): ready, it runs before every
// other node of its device, so the other device's thread gets its work as
// early as it can.
// By creation order alone it would wait behind every node created after it;
// in a micro-batch pipeline stage 1 runs ahead of stage 2, so every hand-over
// was created before most of stage 2's nodes and stage 1's backward could
// not start until all of stage 2's had finished.
constexpr uint64_t kHandOverPriority = UINT64_MAX - 1;

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // "MulBackward", for messages and graph printing.
  virtual std::string name() const = 0;
  // grads[i] is the gradient of forward output i; returns one gradient per
  // next edge (undefined where no gradient flows).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release_saved() {}

  // Deferred nodes only.  Whether `other`, another ready deferred node of the
  // same backward pass with the same next edges, may run together with this
  // one through apply_coalesced (e.g. one layer's weight gradients of several
  // micro-batches).
  virtual bool coalesces_with(const Node& other) const {
    (void)other;
    return false;
  }
  // Runs `group` (this node first, then nodes it coalesces with) as one:
  // grads[k] are group[k]'s incoming gradients; returns this node's
  // gradients for the sum over the group (the others pass nothing on).
  virtual std::vector<Tensor> apply_coalesced(const std::vector<Node*>& group,
                                              std::vector<std::vector<Tensor>>&& grads);

  std::vector<Edge>& next_edges() { return next_edges_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  // Whether forward input i needs a gradient.
  bool needs_input_grad(size_t i) const {
    return i < next_edges_.size() && next_edges_[i].is_valid();
  }
  std::vector<OutputMeta>& outputs() { return outputs_; }
  const std::vector<OutputMeta>& outputs() const { return outputs_; }
  // The device whose thread runs this node.
  Device device() const { return device_; }
  void set_device(Device d) { device_ = d; }
  // Creation order; the engine prefers later nodes (reverse of forward).
  // kHandOverPriority and AccumulateGrad's UINT64_MAX run as soon as ready.
  uint64_t sequence_nr() const { return sequence_nr_; }
  void set_sequence_nr(uint64_t s) { sequence_nr_ = s; }
  // A deferred node runs only when no other node of its device is ready
  // (the weight half of a split backward, autograd/DeferWeightGrad.h).
  bool is_deferred() const { return deferred_; }
  void set_deferred(bool deferred) { deferred_ = deferred; }
  // Whether split_off_deferred gave this node a deferred twin: its apply then
  // returns one more gradient, its output 0's, for the twin (pass_through).
  bool has_deferred_twin() const { return has_deferred_twin_; }

  // Hooks on the gradient of forward output `output_nr`, run before apply.
  using PreHook = std::function<Tensor(const Tensor&)>;
  void add_pre_hook(uint32_t output_nr, PreHook hook) {
    pre_hooks_[output_nr].push_back(std::move(hook));
  }
  const std::map<uint32_t, std::vector<PreHook>>& pre_hooks() const { return pre_hooks_; }

 private:
  std::vector<Edge> next_edges_;
  std::vector<OutputMeta> outputs_;
  Device device_;
  uint64_t sequence_nr_;
  std::map<uint32_t, std::vector<PreHook>> pre_hooks_;
  bool deferred_ = false;
  bool has_deferred_twin_ = false;
  friend bool split_off_deferred(Node& node, const std::shared_ptr<Node>& twin, size_t first);
};

// A tensor saved for backward.  Inputs are kept as they are; outputs are kept
// detached (no reference cycle through their own grad_fn).  The version at
// save time is checked on unpack, so an in-place change in between is caught.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output);  // NOLINT
  // The saved tensor.  Throws when it was freed by an earlier backward or
  // modified in place since it was saved; `node` names the owner in the message.
  Tensor unpack(const Node& node) const;
  void reset();
  bool defined() const { return defined_; }

 private:
  Tensor data_;
  uint64_t version_ = 0;
  bool defined_ = false;
  bool released_ = false;
};

// The leaf sink: accumulates the incoming gradient into `variable`'s .grad,
// running the leaf's hooks before and its post-accumulate hooks after.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
};

// ---- recording helpers used by every differentiable op ------------------------

// Whether any defined tensor among these requires grad (and grad mode is on).
bool any_requires_grad(std::initializer_list<const Tensor*> tensors);
bool any_requires_grad(const std::vector<Tensor>& tensors);
// The edge a gradient for `t` should flow along: its grad_fn, its leaf
// accumulator, or an invalid edge when it needs no gradient.
Edge gradient_edge(const Tensor& t);
// The AccumulateGrad node of a leaf that requires grad (created once).
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);
// Connects `node` to the inputs (its next edges) and makes it the grad_fn of
// the outputs.  Inputs may include undefined tensors (invalid edges).
void set_history(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
                 const std::vector<Tensor>& outputs);
// Splits the gradients of next edges [first, end) of `node` (a weight and a
// bias) off into `twin`, a fresh node of the same kind whose apply then
// computes only those: twin gets node's edges from `first` on (the ones
// before are left invalid), becomes deferred, runs on node's device and
// takes node's output 0 gradient as its only input; node keeps the edges
// before `first` and gets one more edge, to twin, along which its apply
// passes that gradient on (pass_through).  Does nothing and returns false
// unless an edge before `first` and one from `first` on need a gradient.
bool split_off_deferred(Node& node, const std::shared_ptr<Node>& twin, size_t first);
// In apply() of a node that may have been split: appends the pass-through
// gradient (grad_output) to `grads` when the node has a deferred twin.
std::vector<Tensor> pass_through(const Node& node, std::vector<Tensor> grads,
                                 const Tensor& grad_output);
// Throws when an in-place op would modify a leaf that requires grad or a view
// whose base requires grad, while grad mode is on.
void check_inplace(const Tensor& self, const char* op);
// In-place ops record with set_history(node, {self_before, ...}, {self}):
// edges are taken from the inputs before self gets its new grad_fn.

}  // namespace autograd
}  // namespace loom
