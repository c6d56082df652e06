// Cloneable<Derived>: the base for modules that support deep copy.
//
// Derived implements reset(), which (re)creates every parameter, buffer and
// child from the module's options; its constructor calls reset().  clone()
// copies the module (options included), rebuilds it with reset(), then copies
// every parameter and buffer value, so the copy shares nothing.
#pragma once

#include <memory>
#include <optional>

#include "autograd/GradMode.h"
#include "nn/Module.h"

namespace loom {
namespace nn {

template <typename Derived>
class Cloneable : public Module {
 public:
  using Module::Module;

  // (Re)creates parameters, buffers and children from the options.
  virtual void reset() = 0;

  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override {
    auto copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
    copy->clear_registrations();
    copy->reset();
    // Same device as the original unless asked otherwise; then copy values
    // (load_state_dict copies, so nothing aliases the original).
    std::optional<Device> where = device;
    if (!where) {
      const auto params = parameters();
      if (!params.empty()) where = params.front().device();
    }
    if (where) copy->to(*where);
    copy->load_state_dict(state_dict(), /*strict=*/true);
    copy->train(is_training());
    return copy;
  }
};

}  // namespace nn
}  // namespace loom
