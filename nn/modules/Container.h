// Containers: Sequential (runs children in order; indexable and sliceable, so
// pipelines can split it), ModuleList and ModuleDict (hold children for the
// user's own forward).  Children are named "0", "1", ... as in PyTorch.
#pragma once

#include <initializer_list>
#include <utility>

#include "nn/Module.h"
#include "nn/ModuleHolder.h"

namespace loom {
namespace nn {

class SequentialImpl : public Module {
 public:
  SequentialImpl() : Module("Sequential") {}
  // Sequential(Conv2d(...), BatchNorm2d(...), ReLU()).
  template <typename... Holders>
  explicit SequentialImpl(Holders&&... modules) : Module("Sequential") {
    (push_back(std::forward<Holders>(modules)), ...);
  }
  // Sequential({{"conv", Conv2d(...)}, {"relu", ReLU()}}): named children.
  explicit SequentialImpl(std::vector<std::pair<std::string, std::shared_ptr<Module>>> named);

  template <typename Holder, typename = decltype(std::declval<Holder>().ptr())>
  void push_back(Holder holder) {
    push_back(std::shared_ptr<Module>(holder.ptr()));
  }
  void push_back(std::shared_ptr<Module> module);
  void push_back(const std::string& name, std::shared_ptr<Module> module);

  // Runs every child's forward in order.  An error names the failing child.
  // A BatchNorm1d/2d followed by a ReLU runs as one fused pass
  // (BatchNormBase::forward_relu: the same values and gradients).
  Tensor forward(const Tensor& input) override;
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  // Child i (negative counts from the end); throws when out of range.
  std::shared_ptr<Module> operator[](int64_t index) const;
  // The child as its concrete type: seq->at<LinearImpl>(2).
  template <typename M>
  std::shared_ptr<M> at(int64_t index) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[index]);
    LOOM_CHECK(m != nullptr, "Sequential::at: child ", index, " is a ",
               (*this)[index]->type_name(), ", not the requested type");
    return m;
  }
  // A new Sequential sharing children [start, end) (names kept).
  std::shared_ptr<SequentialImpl> slice(int64_t start, int64_t end) const;
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
class Sequential : public ModuleHolder<SequentialImpl> {
 public:
  using ModuleHolder<SequentialImpl>::ModuleHolder;
  Sequential() : ModuleHolder(std::make_shared<SequentialImpl>()) {}
  std::shared_ptr<Module> operator[](int64_t index) const { return (*get())[index]; }
};

class ModuleListImpl : public Module {
 public:
  ModuleListImpl() : Module("ModuleList") {}
  template <typename... Holders>
  explicit ModuleListImpl(Holders&&... modules) : Module("ModuleList") {
    (push_back(std::forward<Holders>(modules)), ...);
  }
  template <typename Holder, typename = decltype(std::declval<Holder>().ptr())>
  void push_back(Holder holder) {
    push_back(std::shared_ptr<Module>(holder.ptr()));
  }
  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](int64_t index) const;
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
class ModuleList : public ModuleHolder<ModuleListImpl> {
 public:
  using ModuleHolder<ModuleListImpl>::ModuleHolder;
  ModuleList() : ModuleHolder(std::make_shared<ModuleListImpl>()) {}
  std::shared_ptr<Module> operator[](int64_t index) const { return (*get())[index]; }
};

class ModuleDictImpl : public Module {
 public:
  ModuleDictImpl() : Module("ModuleDict") {}
  explicit ModuleDictImpl(std::vector<std::pair<std::string, std::shared_ptr<Module>>> items);
  void insert(const std::string& key, std::shared_ptr<Module> module);
  bool contains(const std::string& key) const { return children_.contains(key); }
  // Throws naming the key when absent.
  std::shared_ptr<Module> operator[](const std::string& key) const;
  std::vector<std::string> keys() const { return children_.keys(); }
  size_t size() const { return children_.size(); }
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override;
};
class ModuleDict : public ModuleHolder<ModuleDictImpl> {
 public:
  using ModuleHolder<ModuleDictImpl>::ModuleHolder;
  ModuleDict() : ModuleHolder(std::make_shared<ModuleDictImpl>()) {}
};

}  // namespace nn
}  // namespace loom
