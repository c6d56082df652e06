// The per-shape choice between loom's and oneDNN's convolution kernels; see
// ConvChoice.h.
#include "tensor/cpu/ConvChoice.h"

#include <array>
#include <map>

#include "tensor/Parallel.h"
#include "tensor/WeightReuse.h"
#include "tensor/cpu/TimedChoice.h"
#include "tensor/cpu/Winograd.h"

namespace loom {
namespace cpu {
namespace {

using onednn::ConvPass;

// Below this many multiply-adds a pass is not worth timing: loom's kernels
// run it (oneDNN's reorders to and from its layouts dominate small passes).
constexpr double kTimedMacs = 2e6;

// pass, dtype, thread count, weight reuse (tensor/WeightReuse.h: oneDNN
// then runs without its weight reorders after the first micro-batch, so it
// is timed that way) and every field of the geometry.
using Key = std::array<int64_t, 20>;

Key key_of(ConvPass pass, const native::ConvGeometry& g, DType dtype) {
  return {static_cast<int64_t>(pass), static_cast<int64_t>(dtype), get_num_threads(),
          static_cast<int64_t>(WeightReuse::is_enabled()),
          g.batch, g.in_channels, g.height, g.width, g.out_channels, g.kernel_h, g.kernel_w,
          g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w, g.groups,
          g.out_h, g.out_w};
}

// Per key, whether oneDNN was timed faster.
using BackendChoices = Choices<std::map<Key, bool>>;

BackendChoices& choices() {
  static BackendChoices* c = new BackendChoices;  // never destroyed: convolutions may run at exit
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
  if (choices().find(key, &use_onednn)) return use_onednn ? run_onednn() : run_loom();
  // Each side runs once first: that warms oneDNN's buffers (the primitive
  // itself was made by available()) and, where a side has several ways for
  // the pass (oneDNN's Winograd and layouts, loom's Winograd and direct
  // kernels), times them, and makes the weight copies a pipeline keeps
  // (WeightReuse).  So both are timed as they will run: interleaved, twice
  // each; the faster ran last.
  run_onednn();
  run_loom();
  choices().store(key, first_is_faster(run_onednn, run_loom));
}

void run_loom_conv_pass(ConvPass pass, const native::ConvGeometry& g,
                        const std::function<void()>& run_winograd,
                        const std::function<void()>& run_direct) {
  // Small passes are not worth timing (as above): direct, like before.
  if (!winograd_applies(g) || macs(g) < kTimedMacs) return run_direct();
  // Per key, whether Winograd was timed faster.
  static BackendChoices* winograd_choices = new BackendChoices;  // never destroyed
  const Key key = key_of(pass, g, kFloat32);
  bool use_winograd = false;
  if (winograd_choices->find(key, &use_winograd))
    return use_winograd ? run_winograd() : run_direct();
  winograd_choices->store(key, first_is_faster(run_winograd, run_direct));
}

ConvChoiceStats conv_choice_stats() {
  const auto [decided, onednn] = choices().counts();
  return {decided, onednn};
}

}  // namespace cpu
}  // namespace loom
