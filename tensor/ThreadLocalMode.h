// An on/off mode per thread that stream closures inherit from the thread that
// submitted them (tensor/Stream.h), and the guard that sets it for a scope.
// loom's modes are each one line:
//
//   struct WeightReuse : ThreadLocalMode<WeightReuse, /*kEnabledByDefault=*/false> {};
//   WeightReuse::is_enabled();  WeightReuse::set_enabled(true);
//   ModeGuard<WeightReuse> guard(true);  // restores the previous value at scope end
//
// A mode registers itself with register_stream_state during static
// initialisation of any binary whose code reads it (is_enabled names the
// registration, so the template instantiates it), so a closure runs with
// its submitter's value and the worker's own value is put back afterwards.
#pragma once

#include <cstdint>

#include "tensor/StreamState.h"

namespace loom {

template <typename Mode, bool kEnabledByDefault>
class ThreadLocalMode {
 public:
  static bool is_enabled() {
    (void)registered_;  // instantiates the registration below
    return enabled_;
  }
  static void set_enabled(bool enabled) { enabled_ = enabled; }

 private:
  static inline thread_local bool enabled_ = kEnabledByDefault;
  static inline const bool registered_ = [] {
    register_stream_state({[] { return static_cast<int64_t>(enabled_); },
                           [](int64_t value) { enabled_ = value != 0; }});
    return true;
  }();
};

// Sets Mode to `enabled` until the end of the scope, then restores the value
// it had before.
template <typename Mode>
class ModeGuard {
 public:
  explicit ModeGuard(bool enabled) : previous_(Mode::is_enabled()) { Mode::set_enabled(enabled); }
  ~ModeGuard() { Mode::set_enabled(previous_); }
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace loom
