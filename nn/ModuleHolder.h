// ModuleHolder<Impl>: the shared handle users hold (`nn::Linear fc(784, 10);
// fc->weight; fc(x)`), as libtorch's TORCH_MODULE.  Copies share the module.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include "tensor/Error.h"

namespace loom {
namespace nn {

template <typename Impl>
class ModuleHolder {
 public:
  using ImplType = Impl;

  // Default-constructs the module when it has a default constructor.
  ModuleHolder() {
    if constexpr (std::is_default_constructible_v<Impl>) impl_ = std::make_shared<Impl>();
  }
  // An empty holder, to be assigned later.
  ModuleHolder(std::nullptr_t) {}  // NOLINT
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}  // NOLINT
  // Constructs the module from its constructor's arguments.
  template <typename Arg, typename... Args,
            typename = std::enable_if_t<
                !std::is_same_v<std::decay_t<Arg>, ModuleHolder> &&
                !std::is_same_v<std::decay_t<Arg>, std::shared_ptr<Impl>> &&
                !std::is_same_v<std::decay_t<Arg>, std::nullptr_t>>>
  explicit ModuleHolder(Arg&& arg, Args&&... args)
      : impl_(std::make_shared<Impl>(std::forward<Arg>(arg), std::forward<Args>(args)...)) {}

  Impl* operator->() const { return get(); }
  Impl& operator*() const { return *get(); }
  Impl* get() const {
    LOOM_CHECK(impl_ != nullptr, "ModuleHolder: accessing an empty module holder");
    return impl_.get();
  }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }

  // Calls the module's forward.
  template <typename... Args>
  decltype(auto) operator()(Args&&... args) const {
    return get()->forward(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace nn
}  // namespace loom

// Declares `Name` as the holder of `NameImpl`, like TORCH_MODULE:
//   struct NetImpl : nn::Cloneable<NetImpl> { ... };
//   LOOM_MODULE(Net);
#define LOOM_MODULE(Name)                                       \
  class Name : public ::loom::nn::ModuleHolder<Name##Impl> {    \
   public:                                                      \
    using ::loom::nn::ModuleHolder<Name##Impl>::ModuleHolder;   \
  }
