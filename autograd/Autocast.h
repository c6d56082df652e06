// Autocast: mixed precision chosen per op, at the op's entry, as
// torch.autocast.
//
//   {
//     amp::AutocastGuard autocast(kCPU);            // bfloat16 on the CPU
//     Tensor logits = model->forward(x);            // convolutions, linear: bfloat16
//     Tensor loss = cross_entropy(logits, target);  // losses: float32
//   }
//   loss.backward();                                // outside the region, as in PyTorch
//
// Inside a region, an op on tensors of the region's device type casts its
// floating inputs (float64 excepted, as in PyTorch) by the op's policy:
//   lower    convolutions, linear, mm, bmm, matmul -> the region's dtype
//   float32  ops that lose too much in 16 bits -> float32
//   promote  multi-input ops (cat, stack) -> the widest input dtype
// and every other op runs in its inputs' dtype.  The lists are PyTorch's
// (1.13 for the CPU, whose bfloat16 autocast keeps softmax, norms and
// reductions in bfloat16; CUDA's keeps them in float32): Autocast.cpp.  The
// casts are differentiable, so gradients reach float32 leaves in float32.
// A float32 leaf that requires grad (a weight) is cast once per region: the
// copy is cached until the outermost region on this thread ends.  In-place
// ops and explicit conversions (.to(dtype)) are never autocast.
//
// The state is thread-local and travels with closures submitted to a stream
// (as grad mode does), so pipeline stages on other devices' threads see it.
#pragma once

#include <optional>

#include "tensor/Tensor.h"

namespace loom {
namespace amp {

// Whether autocast is on for `type` on this thread, and its dtype (bfloat16
// for the CPU, float16 for CUDA when never set).
bool is_autocast_enabled(DeviceType type);
DType get_autocast_dtype(DeviceType type);

class AutocastGuard {
 public:
  // dtype: the CPU takes bfloat16 only (float16 is an error, as in PyTorch
  // 1.13); CUDA float16 (default) or bfloat16.  enabled = false turns an
  // enclosing region off for this scope.
  explicit AutocastGuard(DeviceType device_type, std::optional<DType> dtype = std::nullopt,
                         bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType type_;
  bool previous_enabled_;
  DType previous_dtype_;
};

// Drops this thread's cached weight casts (done when the outermost region
// ends).
void clear_autocast_cache();

// ---- for the ops (autograd/functions) --------------------------------------------
namespace detail {

enum class CastPolicy { kLower, kFloat32, kPromote };

// One thread-local read: whether any region is active and not suspended.
bool active();

// While alive, ops do not autocast (an op that has cast its inputs calls
// others without casting twice).
class SuspendAutocast {
 public:
  SuspendAutocast();
  ~SuspendAutocast();
  SuspendAutocast(const SuspendAutocast&) = delete;
  SuspendAutocast& operator=(const SuspendAutocast&) = delete;

 private:
  bool previous_;
};

// The policy of `op` on `type` under autocast, if it has one.
std::optional<CastPolicy> policy(const char* op, DeviceType type);

// The inputs of `op` cast by its policy on the inputs' device type (that of
// the first defined one); unchanged when autocast is off for it or the op
// has no policy there.  Undefined and non-floating tensors pass through.
std::vector<Tensor> cast_inputs(const char* op, std::vector<Tensor> inputs);

}  // namespace detail
}  // namespace amp
}  // namespace loom
