#include "distributed/horovod/Handle.h"

#include "autograd/GradMode.h"
#include "distributed/horovod/HandleState.h"
#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace horovod {
namespace detail {

void HandleState::issue(std::vector<WorkPtr> works, std::function<Tensor(HandleState&)> finish) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (issued_) return;
    works_ = std::move(works);
    finish_ = std::move(finish);
    issued_ = true;
  }
  issued_cv_.notify_all();
}

void HandleState::fail(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (issued_) return;
    error_ = error;
    issued_ = true;
  }
  issued_cv_.notify_all();
}

void HandleState::fail(const std::string& message) { fail(std::make_exception_ptr(Error(message))); }

bool HandleState::poll() {
  std::vector<WorkPtr> works;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!issued_) return false;
    if (finished_ || error_) return true;
    works = works_;
  }
  for (const WorkPtr& w : works)
    if (!w->is_completed()) return false;
  return true;
}

bool HandleState::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

Tensor HandleState::wait() {
  std::vector<WorkPtr> works;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    issued_cv_.wait(lock, [&] { return issued_; });
    if (error_) std::rethrow_exception(error_);
    if (finished_) return output_;
    works = works_;
  }
  try {
    for (const WorkPtr& w : works) w->wait();
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
    std::rethrow_exception(error_);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) std::rethrow_exception(error_);
  if (!finished_) {
    try {
      autograd::NoGradGuard no_grad;
      output_ = finish_ ? finish_(*this) : Tensor();
    } catch (...) {
      error_ = std::current_exception();
      finish_ = nullptr;
      throw;
    }
    finish_ = nullptr;
    works_.clear();
    finished_ = true;
  }
  return output_;
}

}  // namespace detail

const std::string& Handle::name() const {
  LOOM_CHECK(state_ != nullptr, "hvd::Handle::name: the handle is undefined");
  return state_->name;
}

bool poll(const Handle& handle) {
  LOOM_CHECK(handle.defined(), "hvd::poll: the handle is undefined (default-constructed)");
  return handle.state()->poll();
}

Tensor synchronize(const Handle& handle) {
  LOOM_CHECK(handle.defined(), "hvd::synchronize: the handle is undefined (default-constructed)");
  return handle.state()->wait();
}

std::vector<int64_t> received_splits(const Handle& handle) {
  LOOM_CHECK(handle.defined(), "hvd::received_splits: the handle is undefined (default-constructed)");
  LOOM_CHECK(handle.state()->kind == OpKind::kAlltoall, "hvd::received_splits: '", handle.name(),
             "' is an ", to_string(handle.state()->kind), ", not an alltoall");
  LOOM_CHECK(handle.state()->finished(),
             "hvd::received_splits: call hvd::synchronize on '", handle.name(), "' first");
  return handle.state()->received_splits;
}

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
