// Work: the handle an asynchronous collective returns.
//
// A collective is enqueued and runs in the background (Gloo: on the process
// group's worker thread; NCCL: on its communication stream).  wait() blocks
// until it has finished and rethrows its error, if any: a timeout names the
// collective, the rank and the timeout.  Waiting twice is fine.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace loom {
namespace distributed {

class Work {
 public:
  virtual ~Work() = default;

  // True once the collective has finished (successfully or not).
  virtual bool is_completed();
  // True once it has finished without error.
  virtual bool is_success();
  // Blocks until finished; throws the collective's error.
  virtual void wait();
  // What this work is, e.g. "all_reduce (sum) of 1024 float32 on rank 1".
  const std::string& description() const { return description_; }

  // For backends: marks the work finished, with the error it failed with (or
  // none), and runs the completion callbacks.
  void finish(std::exception_ptr error = nullptr);
  // Runs fn once the work has finished (at once if it has).
  void on_completion(std::function<void()> fn);

  explicit Work(std::string description = "") : description_(std::move(description)) {}

 protected:
  std::string description_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void()>> callbacks_;
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace distributed
}  // namespace loom
