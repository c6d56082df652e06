#include "tensor/DeferredChecks.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>

#include "tensor/Error.h"

namespace loom {

namespace {

// More pending checks than this and defer_check waits for the oldest, so a
// loop that never reaches a sync point holds a bounded number of verdicts.
constexpr size_t kMaxPending = 1024;

struct Registry {
  std::mutex mutex;
  std::deque<std::shared_ptr<DeferredCheck>> pending;  // oldest first
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed: checks may be raised at exit
  return *r;
}

bool env_sync_checks() {
  const char* v = std::getenv("LOOM_CUDA_SYNC_CHECKS");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

std::atomic<bool>& sync_flag() {
  static std::atomic<bool> flag{env_sync_checks()};
  return flag;
}

std::deque<std::shared_ptr<DeferredCheck>> snapshot() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.pending;
}

// False when another thread forgot it first.
bool forget(const std::shared_ptr<DeferredCheck>& check) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto it = r.pending.begin(); it != r.pending.end(); ++it) {
    if (*it == check) {
      r.pending.erase(it);
      return true;
    }
  }
  return false;
}

}  // namespace

void defer_check(DeferredCheck check) {
  LOOM_CHECK(check.arrived && check.wait && check.failure,
             "defer_check: a check needs arrived, wait and failure functions");
  {
    // Registered first: trimming below may throw an older check's error,
    // and this one must not be lost (its verdict may still be in flight).
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.pending.push_back(std::make_shared<DeferredCheck>(std::move(check)));
  }
  if (pending_deferred_checks() > kMaxPending) {
    raise_deferred_errors();
    if (pending_deferred_checks() > kMaxPending) {
      const auto oldest = snapshot().front();
      oldest->wait();
      raise_deferred_errors();
    }
  }
}

void raise_deferred_errors(bool wait) {
  // The checks' functions may be slow (a device query) or wait, so they run
  // on a snapshot with no lock held; a check another thread forgets
  // meanwhile is skipped (its failure is thrown once, by that thread).
  for (const auto& check : snapshot()) {
    if (wait) check->wait();
    else if (!check->arrived()) continue;
    const std::string message = check->failure();
    if (forget(check) && !message.empty()) throw Error(message);
  }
}

size_t pending_deferred_checks() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.pending.size();
}

bool sync_checks() { return sync_flag().load(); }
void set_sync_checks(bool on) { sync_flag().store(on); }

}  // namespace loom
