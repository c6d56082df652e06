// Grad mode: whether ops record the graph on this thread.  NoGradGuard turns
// it off for a scope (inference, optimizer steps), as torch::NoGradGuard.
#pragma once

namespace loom {
namespace autograd {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Disables graph recording until the end of the scope.
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Sets grad mode to `enabled` until the end of the scope.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : previous_(GradMode::is_enabled()) {
    GradMode::set_enabled(enabled);
  }
  ~AutoGradMode() { GradMode::set_enabled(previous_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool previous_;
};

}  // namespace autograd

using autograd::NoGradGuard;

}  // namespace loom
