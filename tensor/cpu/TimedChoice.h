// Choosing between two ways of computing the same thing by timing both on
// the first call (as cudnn.benchmark does), and remembering the choice per
// key: tensor/cpu/ConvChoice.cpp (loom's kernels or oneDNN's) and
// tensor/cpu/OneDnnConvolution.cpp (oneDNN's NHWC kernels or its blocked
// ones) use it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <utility>

namespace loom {
namespace cpu {

// Runs `first` and `second` twice each, interleaved, and returns whether
// `first` was the faster (its best time under `second`'s).  Each must
// compute the whole result into the same outputs (overwriting them); the
// faster one has run last when this returns, so the outputs hold its result.
inline bool first_is_faster(const std::function<void()>& first,
                            const std::function<void()>& second) {
  auto seconds = [](const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double t_first = std::numeric_limits<double>::infinity(), t_second = t_first;
  for (int i = 0; i < 2; ++i) {
    t_first = std::min(t_first, seconds(first));
    t_second = std::min(t_second, seconds(second));
  }
  const bool faster = t_first < t_second;
  if (faster) first();  // `second` ran last
  return faster;
}

// The choices made so far, key -> bool, shared across threads.  Map is a
// std::map or std::unordered_map of Key to bool.
template <typename Map>
class Choices {
 public:
  using Key = typename Map::key_type;
  // The choice for key, if made.
  bool find(const Key& key, bool* chosen) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = choices_.find(key);
    if (it == choices_.end()) return false;
    *chosen = it->second;
    return true;
  }
  void store(const Key& key, bool chosen) {
    std::lock_guard<std::mutex> lock(mutex_);
    choices_.emplace(key, chosen);
  }
  // How many keys have a choice, and how many of those chose true.
  std::pair<int64_t, int64_t> counts() {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t chosen = 0;
    for (const auto& entry : choices_) chosen += entry.second;
    return {static_cast<int64_t>(choices_.size()), chosen};
  }

 private:
  std::mutex mutex_;
  Map choices_;
};

}  // namespace cpu
}  // namespace loom
