#include "nn/Module.h"

#include <sstream>

#include "autograd/GradMode.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace nn {

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Tensor Module::forward(const Tensor&) {
  LOOM_FAIL(type_name_, ": this module has no single-tensor forward(); call its own forward "
            "overload instead");
}

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  LOOM_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name_,
             ".register_parameter: invalid name \"", name, "\" (must be non-empty, no '.')");
  LOOM_CHECK(!children_.contains(name) && !buffers_.contains(name), type_name_,
             ".register_parameter: \"", name, "\" is already a child or buffer");
  if (tensor.defined()) {
    // Parameters are leaves: detach from any history they were computed with.
    if (!tensor.is_leaf()) tensor = tensor.detach();
    tensor.requires_grad_(requires_grad);
  }
  return parameters_.insert(name, tensor);
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor) {
  LOOM_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name_,
             ".register_buffer: invalid name \"", name, "\" (must be non-empty, no '.')");
  LOOM_CHECK(!children_.contains(name) && !parameters_.contains(name), type_name_,
             ".register_buffer: \"", name, "\" is already a child or parameter");
  return buffers_.insert(name, tensor);
}

void Module::register_child(const std::string& name, std::shared_ptr<Module> module) {
  LOOM_CHECK(module != nullptr, type_name_, ".register_module: \"", name, "\" is null");
  LOOM_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name_,
             ".register_module: invalid name \"", name, "\" (must be non-empty, no '.')");
  LOOM_CHECK(!parameters_.contains(name) && !buffers_.contains(name), type_name_,
             ".register_module: \"", name, "\" is already a parameter or buffer");
  children_.insert(name, std::move(module));
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  LOOM_CHECK(children_.contains(name), type_name_, ".replace_module: no child named \"", name,
             "\"");
  LOOM_CHECK(module != nullptr, type_name_, ".replace_module: \"", name, "\" is null");
  children_.insert(name, std::move(module));
}

void Module::clear_registrations() {
  parameters_.clear();
  buffers_.clear();
  children_.clear();
}

void Module::collect_parameters(const std::string& prefix, OrderedDict<Tensor>& out,
                                bool recurse) const {
  for (const auto& [name, t] : parameters_)
    if (t.defined()) out.insert(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect_parameters(prefix + name + ".", out, true);
}

void Module::collect_buffers(const std::string& prefix, OrderedDict<Tensor>& out,
                             bool recurse) const {
  for (const auto& [name, t] : buffers_)
    if (t.defined()) out.insert(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out, true);
}

std::vector<Tensor> Module::parameters(bool recurse) const { return named_parameters(recurse).values(); }

OrderedDict<Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<Tensor> out;
  collect_parameters("", out, recurse);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

OrderedDict<Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<Tensor> out;
  collect_buffers("", out, recurse);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const { return children_.values(); }
OrderedDict<std::shared_ptr<Module>> Module::named_children() const { return children_; }

std::vector<std::shared_ptr<Module>> Module::modules() { return named_modules().values(); }

OrderedDict<std::shared_ptr<Module>> Module::named_modules(const std::string& prefix) {
  OrderedDict<std::shared_ptr<Module>> out;
  std::function<void(const std::string&, const std::shared_ptr<Module>&)> walk =
      [&](const std::string& name, const std::shared_ptr<Module>& m) {
        out.insert(name, m);
        for (const auto& [child_name, child] : m->children_)
          walk(name.empty() ? child_name : name + "." + child_name, child);
      };
  // Inside a constructor (reset()) no shared_ptr owns this module yet: hand
  // out a non-owning alias, valid while the module lives.
  std::shared_ptr<Module> self = weak_from_this().lock();
  if (!self) self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);
  walk(prefix, self);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

namespace {

// Points an existing tensor handle at new data (module.to keeps the user's
// handles valid, like PyTorch's param.data = ...).
void set_data(const Tensor& target, const Tensor& source) {
  if (target.is_same(source)) return;
  TensorImpl& dst = *target.impl();
  const TensorImpl& src = *source.impl();
  dst.storage = src.storage;
  dst.sizes = src.sizes;
  dst.strides = src.strides;
  dst.storage_offset = src.storage_offset;
  dst.dtype = src.dtype;
  dst.device = src.device;
  // A leaf's cached gradient accumulator was made for its old device and
  // dtype; graphs recorded from now on must get a fresh one (as PyTorch's
  // set_data does), or their backward would deliver to the old device.
  if (target.has_autograd_meta()) target.autograd_meta().grad_accumulator.reset();
}

void move_tensor(const Tensor& t, Device device, DType dtype) {
  if (!t.defined()) return;
  set_data(t, native::to(t, device, dtype));
  Tensor g = t.grad();
  if (g.defined()) set_data(g, native::to(g, device, dtype));
}

}  // namespace

void Module::to(Device device, bool /*non_blocking*/) {
  autograd::NoGradGuard no_grad;
  for (auto& [name, t] : parameters_) move_tensor(t, device, t.defined() ? t.dtype() : kFloat32);
  for (auto& [name, t] : buffers_) move_tensor(t, device, t.defined() ? t.dtype() : kFloat32);
  for (auto& [name, child] : children_) child->to(device);
}

void Module::to(DType dtype) {
  LOOM_CHECK(is_floating_point(dtype), type_name_, ".to: modules convert only to floating "
             "dtypes, got ", dtype_name(dtype));
  autograd::NoGradGuard no_grad;
  // Only floating tensors convert (num_batches_tracked stays int64).
  for (auto& [name, t] : parameters_)
    if (t.defined() && t.is_floating_point()) move_tensor(t, t.device(), dtype);
  for (auto& [name, t] : buffers_)
    if (t.defined() && t.is_floating_point()) move_tensor(t, t.device(), dtype);
  for (auto& [name, child] : children_) child->to(dtype);
}

void Module::zero_grad(bool set_to_none) {
  autograd::NoGradGuard no_grad;
  for (Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else native::fill_(g, 0);
  }
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& m : modules()) fn(*m);
}

StateDict Module::state_dict() const {
  StateDict out;
  std::function<void(const std::string&, const Module&)> walk = [&](const std::string& prefix,
                                                                   const Module& m) {
    for (const auto& [name, t] : m.parameters_)
      if (t.defined()) out.insert(prefix + name, t);
    for (const auto& [name, t] : m.buffers_)
      if (t.defined()) out.insert(prefix + name, t);
    for (const auto& [name, child] : m.children_) walk(prefix + name + ".", *child);
  };
  walk("", *this);
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  const StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, t] : own) {
    const Tensor* src = state.find(name);
    if (!src) {
      missing.push_back(name);
    } else if (src->sizes() != t.sizes()) {
      mismatched.push_back(name + ": copying a param with shape " + shape_str(src->sizes()) +
                           " from checkpoint, the shape in current model is " +
                           shape_str(t.sizes()));
    }
  }
  for (const auto& [name, t] : state)
    if (!own.contains(name)) unexpected.push_back(name);
  const bool bad = !mismatched.empty() || (strict && (!missing.empty() || !unexpected.empty()));
  if (bad) {
    std::ostringstream msg;
    msg << "Error(s) in loading state_dict for " << type_name_ << ":";
    auto list = [&](const char* what, const std::vector<std::string>& keys) {
      if (keys.empty()) return;
      msg << "\n  " << what << ": ";
      for (size_t i = 0; i < keys.size(); ++i) msg << (i ? ", " : "") << '"' << keys[i] << '"';
    };
    if (strict) list("Missing key(s) in state_dict", missing);
    if (strict) list("Unexpected key(s) in state_dict", unexpected);
    for (const auto& m : mismatched) msg << "\n  size mismatch for " << m;
    throw Error(msg.str());
  }
  autograd::NoGradGuard no_grad;
  for (const auto& [name, t] : own) {
    const Tensor* src = state.find(name);
    if (src) native::copy_(t, *src);
  }
}

std::shared_ptr<Module> Module::clone(std::optional<Device>) const {
  LOOM_FAIL(type_name_, ".clone: this module does not support clone(); derive it from "
            "nn::Cloneable<", type_name_, "Impl> and implement reset()");
}

void Module::pretty_print(std::ostream& out) const { out << type_name_; }

namespace {
void print_tree(std::ostream& out, const Module& m, int indent) {
  m.pretty_print(out);
  const auto children = m.named_children();
  if (children.empty()) return;
  out << "(\n";
  for (const auto& [name, child] : children) {
    out << std::string(indent + 2, ' ') << "(" << name << "): ";
    print_tree(out, *child, indent + 2);
    out << "\n";
  }
  out << std::string(indent, ' ') << ")";
}
}  // namespace

std::ostream& operator<<(std::ostream& out, const Module& module) {
  print_tree(out, module, 0);
  return out;
}

}  // namespace nn
}  // namespace loom
