// Puts the calling thread under Linux's SCHED_BATCH policy for its scope;
// threads it creates meanwhile inherit the policy (pthread's default
// PTHREAD_INHERIT_SCHED), which is how ProcessGroupGloo reaches the transport
// loop thread that Gloo starts inside CreateDevice.
//
// Why: a SCHED_BATCH thread that wakes up never preempts the running thread;
// it waits for that thread to block or for the next scheduler tick.  Gloo's
// loop thread wakes on every message, and when it preempts a Gloo worker that
// holds the pair's mutex mid-write, the loop's try_lock fails and it spins on
// epoll until a tick (4 ms) lets the worker finish.  See ProcessGroupGloo.cpp,
// "Transport thread".
//
// Only a thread under the default policy (SCHED_OTHER) is changed; a program
// that chose another policy keeps it.  Both switches need no privilege.
// Elsewhere than Linux this does nothing.
#pragma once

namespace loom {
namespace distributed {

class BatchSchedulingGuard {
 public:
  // enable = false: does nothing (for callers whose option turns it off).
  explicit BatchSchedulingGuard(bool enable = true);
  ~BatchSchedulingGuard();
  BatchSchedulingGuard(const BatchSchedulingGuard&) = delete;
  BatchSchedulingGuard& operator=(const BatchSchedulingGuard&) = delete;

  // Whether the calling thread was switched (and is switched back on exit).
  bool active() const { return active_; }

 private:
  bool active_ = false;
};

// The calling thread's scheduling policy is SCHED_BATCH (false elsewhere than
// Linux).
bool current_thread_is_batch_scheduled();

}  // namespace distributed
}  // namespace loom
