// The state behind an hvd::Handle, shared by the Controller (which issues
// the operation's collectives) and whoever waits for it.  Private to
// distributed/horovod.
//
// Life of an operation: queued (submitted, not yet negotiated) -> issued
// (its collectives are running; `works`) -> finished (the waiter ran
// `finish`, which unpacks the result from the fused buffer into the output
// and scales it).  Unpacking happens on the waiting thread, after the works
// have completed, so the background thread never blocks on a payload.  A
// failure at any stage (negotiation error, a collective's error, shutdown)
// is stored and rethrown by every wait.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/Work.h"
#include "distributed/horovod/Negotiation.h"
#include "tensor/Tensor.h"

namespace loom {
namespace distributed {
namespace horovod {
namespace detail {

struct HandleState {
  HandleState(std::string name, OpKind kind) : name(std::move(name)), kind(kind) {}

  const std::string name;
  const OpKind kind;

  // Controller side.  issue(): the collectives run; `finish` (run once, by
  // the first waiter, after every work completed) returns the output.
  void issue(std::vector<WorkPtr> works, std::function<Tensor(HandleState&)> finish);
  void fail(std::exception_ptr error);
  void fail(const std::string& message);

  // Waiter side.
  bool poll();
  Tensor wait();

  // Whether finish has run (synchronize returned).
  bool finished();

  // Set by an all-to-all's finish (which runs under the state's lock).
  std::vector<int64_t> received_splits;

 private:
  std::mutex mutex_;
  std::condition_variable issued_cv_;
  bool issued_ = false;
  bool finished_ = false;
  std::exception_ptr error_;
  std::vector<WorkPtr> works_;
  std::function<Tensor(HandleState&)> finish_;
  Tensor output_;
};

}  // namespace detail
}  // namespace horovod
}  // namespace distributed
}  // namespace loom
