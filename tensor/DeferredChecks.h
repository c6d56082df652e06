// Checks whose verdict arrives later, so that validating data on a device
// never makes the host wait.
//
// An op that must check values living on a GPU (class targets, gather and
// embedding indices) queues a small kernel that writes its verdict, copies the
// verdict to pinned host memory, records an event and registers a
// DeferredCheck; the op itself returns at once.  The error of a failed check
// is thrown by raise_deferred_errors(), which loom calls at every point where
// the host waits for a device anyway (item(), copies to the host,
// synchronize()) and before queuing another check; so it surfaces at the next
// such point, naming the op and the bad value.  The kernels that consume the
// values never touch memory outside their tensors for a bad value, so nothing
// is corrupted in between.
//
// With sync checks on (set_sync_checks(true), or LOOM_CUDA_SYNC_CHECKS=1 in
// the environment, like CUDA_LAUNCH_BLOCKING for debugging) an op waits for
// its check and throws from the op itself.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace loom {

struct DeferredCheck {
  // Non-blocking: has the verdict arrived?
  std::function<bool()> arrived;
  // Blocks until the verdict has arrived.
  std::function<void()> wait;
  // Once arrived: "" when the check passed, else the error message.
  std::function<std::string()> failure;
};

// Registers a check (its functions are called with no lock held by loom, from
// whichever thread raises).  When too many are pending, waits for the oldest.
void defer_check(DeferredCheck check);

// Forgets every arrived check that passed; throws loom::Error with the
// message of the oldest arrived check that failed (which is forgotten; later
// failures are thrown by later calls).  With wait, waits for every pending
// check first.
void raise_deferred_errors(bool wait = false);

// Checks registered and not yet found to have passed or failed.
size_t pending_deferred_checks();

// Whether ops wait for their checks and throw at once (default: off, or
// LOOM_CUDA_SYNC_CHECKS=1 from the environment).
bool sync_checks();
void set_sync_checks(bool on);

}  // namespace loom
