// hvd::Handle: what an asynchronous hvd operation returns (Horovod's handle).
//
//   hvd::Handle h = hvd::allreduce_async(t);   // queued; reduced in the background
//   ...                                        // compute meanwhile
//   Tensor avg = hvd::synchronize(h);          // waits, returns the result
//
// A handle is a shared value: copies refer to the same operation; the
// operation goes on even when every copy is dropped (its result is then
// lost).  The input tensor must not be modified until the operation is
// synchronized.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/Tensor.h"

namespace loom {
namespace distributed {
namespace horovod {

namespace detail {
struct HandleState;
}

class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<detail::HandleState> state) : state_(std::move(state)) {}

  bool defined() const { return state_ != nullptr; }
  // The operation's name (the one given, or "allreduce.noname.<n>").
  const std::string& name() const;
  const std::shared_ptr<detail::HandleState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::HandleState> state_;
};

// True once the operation has finished, successfully or not, so that
// synchronize() will not block on communication.  Throws for an undefined
// handle.
bool poll(const Handle& handle);

// Waits for the operation and returns its output: the reduced or broadcast
// tensor (the input itself for the in-place forms), the gathered tensor, or
// the all-to-all's received rows.  Synchronizing twice returns the same
// tensor.  Throws the operation's loom::Error (ranks disagreeing on the
// tensor, a peer that failed, hvd shut down), and for an undefined handle.
Tensor synchronize(const Handle& handle);

// For an all-to-all handle, after synchronize(): how many rows came from
// each rank (dim 0 of the output is their sum).  Throws for other handles or
// before synchronize().
std::vector<int64_t> received_splits(const Handle& handle);

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
