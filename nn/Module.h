// nn::Module: the base of every layer and model, shaped like libtorch's.
//
// A module registers its parameters, buffers and children by name; from that
// registry follow named_parameters(), state_dict(), recursive to(device),
// train()/eval() and printing.  Modules are shared objects held through
// ModuleHolder handles (nn::Linear wraps nn::LinearImpl), so copying a
// handle never copies weights; clone() does.
//
// Modules with one tensor in and one out override forward(const Tensor&) so
// containers (Sequential) can call them; others add their own overloads.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "nn/OrderedDict.h"
#include "tensor/Tensor.h"

namespace loom {
namespace nn {

using StateDict = OrderedDict<Tensor>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = default;
  Module& operator=(const Module&) = default;

  // "Linear", "Conv2d", ...: the type shown when printing.
  const std::string& type_name() const { return type_name_; }

  // The single-tensor forward used by containers.  Throws unless overridden.
  virtual Tensor forward(const Tensor& input);

  // ---- registration -------------------------------------------------------
  // Registers (or replaces) a parameter; it becomes a leaf that requires grad
  // when requires_grad.  Returns a reference to the stored handle.
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // Registers (or replaces) a buffer: state saved in state_dict that is not
  // trained (running statistics).  An undefined tensor is allowed (skipped).
  Tensor& register_buffer(const std::string& name, Tensor tensor);
  // Registers a child module; returns it.
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    register_child(name, module);
    return module;
  }
  // Registers a child given by its holder (nn::Linear, nn::Sequential, ...).
  template <typename Holder, typename = decltype(std::declval<Holder>().ptr())>
  Holder register_module(const std::string& name, Holder holder) {
    register_child(name, holder.ptr());
    return holder;
  }
  // Replaces an already registered child.
  void replace_module(const std::string& name, std::shared_ptr<Module> module);

  // ---- traversal ------------------------------------------------------------
  // Parameters of this module (and children, recursively, when recurse), in
  // registration order, names joined with '.' as in PyTorch ("layer1.0.weight").
  std::vector<Tensor> parameters(bool recurse = true) const;
  OrderedDict<Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<Tensor> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::shared_ptr<Module>> named_children() const;
  // This module and all descendants, depth first, this first.
  std::vector<std::shared_ptr<Module>> modules();
  OrderedDict<std::shared_ptr<Module>> named_modules(const std::string& prefix = "");

  // ---- state -------------------------------------------------------------------
  // Sets training mode here and in every child.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves (or converts) every parameter and buffer in place, recursively;
  // handles held by the user stay valid.
  virtual void to(Device device, bool non_blocking = false);
  virtual void to(DType dtype);
  // Clears every parameter's .grad (set_to_none) or zeroes it.
  void zero_grad(bool set_to_none = true);
  // Calls fn on this module and every descendant.
  void apply(const std::function<void(Module&)>& fn);
  // Parameters and buffers by full name (undefined buffers are skipped).
  StateDict state_dict() const;
  // Copies values from `state` into the registered tensors.  strict: every
  // key must match both ways; otherwise unknown/missing keys are ignored.
  // Throws loom::Error listing every missing, unexpected and mis-shaped key.
  void load_state_dict(const StateDict& state, bool strict = true);
  // A deep copy (new parameters with the same values).  Modules support it
  // by deriving from Cloneable<Impl>.
  virtual std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const;

  // ---- printing -----------------------------------------------------------
  // One line describing this module's own options ("Linear(in_features=...)").
  virtual void pretty_print(std::ostream& out) const;

 protected:
  void register_child(const std::string& name, std::shared_ptr<Module> module);
  // Used by Cloneable: clears the registries before reset() rebuilds them.
  void clear_registrations();

  OrderedDict<Tensor> parameters_;
  OrderedDict<Tensor> buffers_;
  OrderedDict<std::shared_ptr<Module>> children_;
  bool training_ = true;

 private:
  void collect_parameters(const std::string& prefix, OrderedDict<Tensor>& out, bool recurse) const;
  void collect_buffers(const std::string& prefix, OrderedDict<Tensor>& out, bool recurse) const;
  std::string type_name_;
};

// Prints the module tree like PyTorch:
//   ConvNet(
//     (layer1): Sequential(
//       (0): Conv2d(1, 16, kernel_size=[5, 5], stride=[1, 1], padding=[2, 2])
//   ...
std::ostream& operator<<(std::ostream& out, const Module& module);

}  // namespace nn
}  // namespace loom
