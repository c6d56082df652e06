#include "nn/modules/Container.h"

#include <typeinfo>

#include "nn/modules/Activation.h"
#include "nn/modules/BatchNorm.h"

namespace loom {
namespace nn {

namespace {
// The batch norm whose output child `next` only passes through a ReLU, when
// `m` is a plain BatchNorm1d/2d (not a subclass with its own forward, such as
// SyncBatchNorm) and `next` a ReLU: Sequential then runs the two as one
// batch_norm_relu, one pass over the activations instead of two each way.
BatchNormBase* batch_norm_before_relu(Module& m, const Module* next) {
  if (next == nullptr || typeid(*next) != typeid(ReLUImpl)) return nullptr;
  if (typeid(m) != typeid(BatchNorm2dImpl) && typeid(m) != typeid(BatchNorm1dImpl)) return nullptr;
  return static_cast<BatchNormBase*>(&m);
}

int64_t wrap_index(int64_t index, size_t size, const char* what) {
  const int64_t n = static_cast<int64_t>(size);
  LOOM_CHECK(index >= -n && index < n, what, ": index ", index, " is out of range for ", n,
             " modules");
  return index < 0 ? index + n : index;
}

}  // namespace

SequentialImpl::SequentialImpl(std::vector<std::pair<std::string, std::shared_ptr<Module>>> named)
    : Module("Sequential") {
  for (auto& [name, m] : named) push_back(name, std::move(m));
}

void SequentialImpl::push_back(std::shared_ptr<Module> module) {
  push_back(std::to_string(modules_.size()), std::move(module));
}

void SequentialImpl::push_back(const std::string& name, std::shared_ptr<Module> module) {
  register_child(name, module);
  modules_.push_back(std::move(module));
}

Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  const auto names = children_.keys();
  for (size_t i = 0; i < modules_.size(); ++i) {
    try {
      const Module* next = i + 1 < modules_.size() ? modules_[i + 1].get() : nullptr;
      if (BatchNormBase* bn = batch_norm_before_relu(*modules_[i], next)) {
        x = bn->forward_relu(x);
        ++i;  // the ReLU ran inside
        continue;
      }
      x = modules_[i]->forward(x);
    } catch (const Error& e) {
      throw Error(std::string("Sequential: in child (") + names[i] + ") " +
                  modules_[i]->type_name() + ": " + e.what());
    }
  }
  return x;
}

std::shared_ptr<Module> SequentialImpl::operator[](int64_t index) const {
  return modules_[wrap_index(index, modules_.size(), "Sequential")];
}

std::shared_ptr<SequentialImpl> SequentialImpl::slice(int64_t start, int64_t end) const {
  const int64_t n = static_cast<int64_t>(modules_.size());
  if (start < 0) start += n;
  if (end < 0) end += n;
  LOOM_CHECK(start >= 0 && end <= n && start <= end, "Sequential::slice: [", start, ", ", end,
             ") is not a valid range of ", n, " modules");
  auto out = std::make_shared<SequentialImpl>();
  const auto names = children_.keys();
  for (int64_t i = start; i < end; ++i) out->push_back(names[i], modules_[i]);
  out->train(is_training());
  return out;
}

std::shared_ptr<Module> SequentialImpl::clone(std::optional<Device> device) const {
  auto copy = std::make_shared<SequentialImpl>();
  for (const auto& [name, child] : children_) copy->push_back(name, child->clone(device));
  copy->train(is_training());
  return copy;
}

void ModuleListImpl::push_back(std::shared_ptr<Module> module) {
  register_child(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

std::shared_ptr<Module> ModuleListImpl::operator[](int64_t index) const {
  return modules_[wrap_index(index, modules_.size(), "ModuleList")];
}

std::shared_ptr<Module> ModuleListImpl::clone(std::optional<Device> device) const {
  auto copy = std::make_shared<ModuleListImpl>();
  for (const auto& m : modules_) copy->push_back(m->clone(device));
  copy->train(is_training());
  return copy;
}

ModuleDictImpl::ModuleDictImpl(std::vector<std::pair<std::string, std::shared_ptr<Module>>> items)
    : Module("ModuleDict") {
  for (auto& [k, m] : items) insert(k, std::move(m));
}

void ModuleDictImpl::insert(const std::string& key, std::shared_ptr<Module> module) {
  if (children_.contains(key)) replace_module(key, std::move(module));
  else register_child(key, std::move(module));
}

std::shared_ptr<Module> ModuleDictImpl::operator[](const std::string& key) const {
  const auto* m = children_.find(key);
  LOOM_CHECK(m != nullptr, "ModuleDict: no module named \"", key, "\"");
  return *m;
}

std::shared_ptr<Module> ModuleDictImpl::clone(std::optional<Device> device) const {
  auto copy = std::make_shared<ModuleDictImpl>();
  for (const auto& [name, child] : children_) copy->insert(name, child->clone(device));
  copy->train(is_training());
  return copy;
}

}  // namespace nn
}  // namespace loom
