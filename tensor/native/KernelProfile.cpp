#include "tensor/native/KernelProfile.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <utility>

#include "tensor/CudaGraph.h"
#include "tensor/CudaRuntime.h"

namespace loom {
namespace native {

std::atomic<bool> kernel_profile_on{false};

namespace {

struct Profile {
  std::mutex mutex;
  std::string phase;
  std::map<std::pair<std::string, std::string>, KernelStat> stats;  // by (phase, name)
};

Profile& profile() {
  static Profile* p = new Profile;  // never destroyed: kernels may run at exit
  return *p;
}

thread_local KernelTimer* innermost = nullptr;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The clock after `device` has finished the work queued on it (a CUDA
// device's streams drained; a CPU device's kernels ran on this thread).
// While a cuda::Graph captures this thread's stream nothing runs (and a
// synchronize would break the capture): launches are timed then.
int64_t now_ns_after(Device device) {
  if (device.is_cuda() && !cuda::is_current_stream_capturing(device.index))
    cuda::synchronize(device.index);
  return now_ns();
}

}  // namespace

void start_kernel_profile() {
  Profile& p = profile();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    p.stats.clear();
    p.phase.clear();
  }
  kernel_profile_on.store(true);
}

void set_kernel_profile_phase(const std::string& phase) {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.phase = phase;
}

std::vector<KernelStat> stop_kernel_profile() {
  kernel_profile_on.store(false);
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  std::vector<KernelStat> out;
  for (const auto& entry : p.stats) out.push_back(entry.second);
  std::sort(out.begin(), out.end(),
            [](const KernelStat& a, const KernelStat& b) { return a.seconds > b.seconds; });
  return out;
}

KernelTimer::KernelTimer(const char* name, Device device)
    : name_(name),
      device_(device),
      start_ns_(now_ns_after(device)),
      parent_(innermost),
      uncaught_(std::uncaught_exceptions()) {
  innermost = this;
}

KernelTimer::~KernelTimer() noexcept(false) {
  int64_t end = 0;
  std::exception_ptr wait_error;
  try {
    end = now_ns_after(device_);
  } catch (...) {
    end = now_ns();
    if (std::uncaught_exceptions() == uncaught_) wait_error = std::current_exception();
  }
  const int64_t total = end - start_ns_;
  innermost = parent_;
  if (parent_ != nullptr) parent_->children_ns_ += total;
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  KernelStat& s = p.stats[{p.phase, name_}];
  s.phase = p.phase;
  s.name = name_;
  ++s.calls;
  s.seconds += static_cast<double>(total - children_ns_) * 1e-9;
  if (wait_error) std::rethrow_exception(wait_error);
}

}  // namespace native
}  // namespace loom
