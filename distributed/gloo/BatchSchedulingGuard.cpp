#include "distributed/gloo/BatchSchedulingGuard.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace loom {
namespace distributed {

#if defined(__linux__)

namespace {
// pid 0 is the calling thread (Linux schedules threads, not processes).
bool set_policy(int policy) {
  sched_param param{};
  param.sched_priority = 0;
  return sched_setscheduler(0, policy, &param) == 0;
}
}  // namespace

BatchSchedulingGuard::BatchSchedulingGuard(bool enable) {
  if (enable && sched_getscheduler(0) == SCHED_OTHER) active_ = set_policy(SCHED_BATCH);
}

BatchSchedulingGuard::~BatchSchedulingGuard() {
  if (active_) set_policy(SCHED_OTHER);
}

bool current_thread_is_batch_scheduled() { return sched_getscheduler(0) == SCHED_BATCH; }

#else

BatchSchedulingGuard::BatchSchedulingGuard(bool) {}
BatchSchedulingGuard::~BatchSchedulingGuard() = default;
bool current_thread_is_batch_scheduled() { return false; }

#endif

}  // namespace distributed
}  // namespace loom
