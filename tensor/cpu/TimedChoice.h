// Choosing between ways of computing the same thing by timing them on the
// first call (as cudnn.benchmark does), and remembering the choice per key:
// tensor/cpu/ConvChoice.cpp (loom's kernels or oneDNN's) and
// tensor/cpu/OneDnnConvolution.cpp (oneDNN's NHWC kernels, its blocked ones,
// or a matrix product for a pointwise convolution) use it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace loom {
namespace cpu {

// Runs each of `ways` twice, interleaved, and returns the index of the
// fastest (the best of its two times).  Each must compute the whole result
// into the same outputs (overwriting them); the fastest has run last when
// this returns, so the outputs hold its result.  The second round runs the
// first round's leader last: when it stays the fastest (the usual case) no
// third run is needed.
inline size_t fastest_of(const std::vector<std::function<void()>>& ways) {
  auto seconds = [](const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto argmin = [](const std::vector<double>& v) {
    return static_cast<size_t>(std::min_element(v.begin(), v.end()) - v.begin());
  };
  std::vector<double> best(ways.size());
  for (size_t w = 0; w < ways.size(); ++w) best[w] = seconds(ways[w]);
  const size_t leader = argmin(best);
  for (size_t w = 0; w < ways.size(); ++w)
    if (w != leader) best[w] = std::min(best[w], seconds(ways[w]));
  best[leader] = std::min(best[leader], seconds(ways[leader]));
  const size_t fastest = argmin(best);
  if (fastest != leader) ways[fastest]();  // the leader ran last
  return fastest;
}

// fastest_of({first, second}) == 0.
inline bool first_is_faster(const std::function<void()>& first,
                            const std::function<void()>& second) {
  return fastest_of({first, second}) == 0;
}

// The choices made so far, key -> value (a bool or an index), shared across
// threads.  Map is a std::map or std::unordered_map.
template <typename Map>
class Choices {
 public:
  using Key = typename Map::key_type;
  using Value = typename Map::mapped_type;
  // The choice for key, if made.
  bool find(const Key& key, Value* chosen) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = choices_.find(key);
    if (it == choices_.end()) return false;
    *chosen = it->second;
    return true;
  }
  void store(const Key& key, Value chosen) {
    std::lock_guard<std::mutex> lock(mutex_);
    choices_.emplace(key, chosen);
  }
  // How many keys have a choice, and how many of those chose true (nonzero).
  std::pair<int64_t, int64_t> counts() {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t chosen = 0;
    for (const auto& entry : choices_) chosen += entry.second != Value();
    return {static_cast<int64_t>(choices_.size()), chosen};
  }

 private:
  std::mutex mutex_;
  Map choices_;
};

}  // namespace cpu
}  // namespace loom
