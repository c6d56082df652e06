// The handles an emulated library (cuBLAS, cuDNN) has created and not yet
// destroyed, so a call can tell a live handle from a destroyed or foreign
// one and answer as the library does.  Internal to tools/cuda/emu/src.
#pragma once

#include <mutex>
#include <unordered_set>

namespace loom_emu {
namespace libs {

template <typename Context>
class LiveHandles {
 public:
  // The one registry of Context's handles; outlives static destructors
  // (loom never destroys its handles).
  static LiveHandles& instance() {
    static auto* handles = new LiveHandles();
    return *handles;
  }
  void add(const Context* h) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.insert(h);
  }
  // False when h was not live.
  bool remove(const Context* h) {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.erase(h) != 0;
  }
  bool contains(const Context* h) const {
    if (h == nullptr) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.count(h) != 0;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_set<const Context*> live_;
};

}  // namespace libs
}  // namespace loom_emu
