// The cache of cuDNN convolution algorithms: one choice per shape key.
//
// Choosing an algorithm costs a cudnnGet*_v7 heuristic query, or, with
// cudnn_benchmark on, a cudnnFind* run that times every algorithm; both are
// far too slow to repeat per call, so the choice is kept per ConvKey: every
// input that changes which algorithms are valid or fastest (device, dtype,
// the direction, all shapes and convolution parameters, whether TF32 is
// allowed, whether the choice was benchmarked, and the layout).  Plain C++, so CI tests the
// key and the cache without a GPU (tests/tensor/conv_algo_cache_test.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace loom {
namespace cuda {

// Which of the three convolution passes an algorithm is for.
enum class ConvPass : int64_t { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

// The shape key: a flat array of every field, so equality and hashing cover
// all of them by construction.
struct ConvKey {
  static constexpr size_t kFields = 20;
  std::array<int64_t, kFields> fields{};
  bool operator==(const ConvKey& o) const { return fields == o.fields; }
  bool operator!=(const ConvKey& o) const { return !(*this == o); }
};

struct ConvKeyParams {
  int64_t device = 0, dtype = 0;
  ConvPass pass = ConvPass::kForward;
  int64_t batch = 0, in_channels = 0, height = 0, width = 0;
  int64_t out_channels = 0, kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  bool allow_tf32 = false, benchmark = false;
  bool channels_last = false;  // NHWC activations and OHWI weights
};

inline ConvKey make_conv_key(const ConvKeyParams& p) {
  ConvKey k;
  k.fields = {p.device,      p.dtype,      static_cast<int64_t>(p.pass),
              p.batch,       p.in_channels, p.height,
              p.width,       p.out_channels, p.kernel_h,
              p.kernel_w,    p.stride_h,   p.stride_w,
              p.pad_h,       p.pad_w,      p.dilation_h,
              p.dilation_w,  p.groups,     p.allow_tf32 ? 1 : 0,
              p.benchmark ? 1 : 0,  p.channels_last ? 1 : 0};
  return k;
}

struct ConvKeyHash {
  size_t operator()(const ConvKey& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields' bytes
    for (int64_t f : k.fields) {
      uint64_t v = static_cast<uint64_t>(f);
      for (int b = 0; b < 8; ++b) {
        h ^= (v >> (8 * b)) & 0xff;
        h *= 1099511628211ull;
      }
    }
    return static_cast<size_t>(h);
  }
};

// A thread-safe map ConvKey -> Value (the chosen algorithm, its math type and
// workspace size).  Two threads missing the same key both choose; the first
// insert wins and both then use the stored choice.
template <typename Value>
class ConvAlgoCache {
 public:
  bool find(const ConvKey& key, Value* out) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    *out = it->second;
    return true;
  }
  // Stores value unless key is present; returns what the cache holds for key.
  Value insert(const ConvKey& key, const Value& value) {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.emplace(key, value).first->second;
  }
  // Stores value for key, replacing what was there (a cached choice that
  // stopped working, say its workspace no longer fits).
  void assign(const ConvKey& key, const Value& value) {
    std::lock_guard<std::mutex> lock(mu_);
    map_[key] = value;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<ConvKey, Value, ConvKeyHash> map_;
};

}  // namespace cuda
}  // namespace loom
