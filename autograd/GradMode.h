// Grad mode: whether ops record the graph on this thread (and in the
// closures it submits to streams).  NoGradGuard turns it off for a scope
// (inference, optimizer steps), as torch::NoGradGuard.
#pragma once

#include "tensor/ThreadLocalMode.h"

namespace loom {
namespace autograd {

struct GradMode : ThreadLocalMode<GradMode, /*kEnabledByDefault=*/true> {};

// Disables graph recording until the end of the scope.
class NoGradGuard : public ModeGuard<GradMode> {
 public:
  NoGradGuard() : ModeGuard(false) {}
};

// Sets grad mode to `enabled` until the end of the scope.
using AutoGradMode = ModeGuard<GradMode>;

}  // namespace autograd

using autograd::NoGradGuard;

}  // namespace loom
