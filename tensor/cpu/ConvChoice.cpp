// The per-shape choice between loom's and oneDNN's convolution kernels; see
// ConvChoice.h.
#include "tensor/cpu/ConvChoice.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>

#include "tensor/Parallel.h"

namespace loom {
namespace cpu {
namespace {

using onednn::ConvPass;

// Below this many multiply-adds a pass is not worth timing: loom's kernels
// run it (oneDNN's reorders to and from its layouts dominate small passes).
constexpr double kTimedMacs = 2e6;

// pass, dtype, thread count and every field of the geometry.
using Key = std::array<int64_t, 19>;

Key key_of(ConvPass pass, const native::ConvGeometry& g, DType dtype) {
  return {static_cast<int64_t>(pass), static_cast<int64_t>(dtype), get_num_threads(),
          g.batch, g.in_channels, g.height, g.width, g.out_channels, g.kernel_h, g.kernel_w,
          g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w, g.groups,
          g.out_h, g.out_w};
}

double seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class Choices {
 public:
  // The decided backend for key (true: oneDNN), if any.
  bool find(const Key& key, bool* onednn) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = decided_.find(key);
    if (it == decided_.end()) return false;
    *onednn = it->second;
    return true;
  }
  void store(const Key& key, bool onednn) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (decided_.emplace(key, onednn).second && onednn) ++onednn_count_;
  }
  ConvChoiceStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {static_cast<int64_t>(decided_.size()), onednn_count_};
  }

 private:
  std::mutex mutex_;
  std::map<Key, bool> decided_;
  int64_t onednn_count_ = 0;
};

Choices& choices() {
  static Choices* c = new Choices;  // never destroyed: convolutions may run at exit
  return *c;
}

double macs(const native::ConvGeometry& g) {
  return static_cast<double>(g.batch) * g.out_h * g.out_w * g.out_channels *
         (g.in_channels / g.groups) * g.kernel_h * g.kernel_w;
}

// Whether oneDNN may run this pass at all (asks oneDNN, making its
// primitive, only when it may).
bool onednn_candidate(ConvPass pass, const native::ConvGeometry& g, DType dtype) {
  const std::string& backend = onednn::conv_backend();
  if (backend == "loom") return false;
  if (backend == "auto" && dtype == kFloat32 && macs(g) < kTimedMacs) return false;
  return onednn::available(pass, g, dtype);
}

}  // namespace

bool conv_pass_runs(ConvPass pass, const native::ConvGeometry& g, DType dtype) {
  if (dtype == kFloat32 || dtype == kFloat64) return true;
  return dtype == kBFloat16 && onednn_candidate(pass, g, dtype);
}

bool conv_pass_settled_on_loom(ConvPass pass, const native::ConvGeometry& g, DType dtype) {
  if (!onednn_candidate(pass, g, dtype)) return true;
  if (onednn::conv_backend() == "onednn" || dtype == kBFloat16) return false;
  bool use_onednn = false;
  return choices().find(key_of(pass, g, dtype), &use_onednn) && !use_onednn;
}

bool conv_pass_settled_on_onednn(ConvPass pass, const native::ConvGeometry& g, DType dtype) {
  if (!onednn_candidate(pass, g, dtype)) return false;
  if (onednn::conv_backend() == "onednn" || dtype == kBFloat16) return true;
  bool use_onednn = false;
  return choices().find(key_of(pass, g, dtype), &use_onednn) && use_onednn;
}

void run_conv_pass(ConvPass pass, const native::ConvGeometry& g, DType dtype,
                   const std::function<void()>& run_loom,
                   const std::function<void()>& run_onednn) {
  if (!onednn_candidate(pass, g, dtype)) return run_loom();
  if (onednn::conv_backend() == "onednn" || dtype == kBFloat16) return run_onednn();
  const Key key = key_of(pass, g, dtype);
  bool use_onednn = false;
  if (!choices().find(key, &use_onednn)) {
    // Interleaved, twice each; the first oneDNN run also warms its buffers
    // (the primitive itself was made by available()).
    double t_loom = std::numeric_limits<double>::infinity(), t_onednn = t_loom;
    for (int i = 0; i < 2; ++i) {
      t_onednn = std::min(t_onednn, seconds(run_onednn));
      t_loom = std::min(t_loom, seconds(run_loom));
    }
    use_onednn = t_onednn < t_loom;
    choices().store(key, use_onednn);
    // The outputs hold loom's result now; the chosen backend writes them.
    if (!use_onednn) return;
  }
  use_onednn ? run_onednn() : run_loom();
}

ConvChoiceStats conv_choice_stats() { return choices().stats(); }

}  // namespace cpu
}  // namespace loom
