#include "distributed/Work.h"

#include <vector>

namespace loom {
namespace distributed {

bool Work::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

bool Work::is_success() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ && !error_;
}

void Work::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

void Work::finish(std::exception_ptr error) {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = error;
    callbacks.swap(callbacks_);
  }
  done_cv_.notify_all();
  for (auto& fn : callbacks) fn();
}

void Work::on_completion(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_) {
      callbacks_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

}  // namespace distributed
}  // namespace loom
