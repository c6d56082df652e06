// Per-kernel wall time of the dispatch slots, for benchmarks that compare a
// step op by op with PyTorch's profiler (bench/train_step --profile).
//
// While a profile runs, every call through a DispatchStub is timed under
// the slot's name ("conv2d_backward", "binary", "copy_", ...) and the phase
// the caller set ("forward", "backward", "optimizer").  Times are self
// times: a kernel that calls other slots (a convolution filling an empty
// output, say) is charged without them.  Calls from any thread count (the
// autograd engine's too).  A call on a CUDA device synchronizes the device
// before its clock starts and before it stops, so it is charged the GPU
// time of the work it queued: a profiled GPU step runs serialized (its
// total is no step time), but the op-by-op split is the GPU's.  Off, the
// cost is one relaxed atomic load per kernel call.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/Device.h"

namespace loom {
namespace native {

extern std::atomic<bool> kernel_profile_on;

inline bool kernel_profiling() { return kernel_profile_on.load(std::memory_order_relaxed); }

struct KernelStat {
  std::string phase, name;
  int64_t calls = 0;
  double seconds = 0;  // self time
};

// Starts a profile (clearing the last one) in phase "".
void start_kernel_profile();
// The phase later calls are charged to (any thread's).
void set_kernel_profile_phase(const std::string& phase);
// Stops and returns the profile, largest time first.
std::vector<KernelStat> stop_kernel_profile();

// Times one kernel call on `device`; DispatchStub makes one per call while
// profiling.  On a CUDA device the end of the call waits for the device,
// which reports what any wait would (a CUDA error, a failed deferred check):
// the destructor throws that error unless the call is already throwing, in
// which case the wait's error gives way to the call's.
class KernelTimer {
 public:
  explicit KernelTimer(const char* name, Device device = Device());
  ~KernelTimer() noexcept(false);
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  const char* name_;
  Device device_;
  int64_t start_ns_;
  int64_t children_ns_ = 0;  // nested kernel calls' time, not this one's
  KernelTimer* parent_;
  int uncaught_;  // std::uncaught_exceptions() at construction
};

}  // namespace native
}  // namespace loom
