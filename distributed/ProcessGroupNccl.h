// ProcessGroupNccl: loom's GPU collectives, run by NCCL on CUDA tensors.
//
// Only builds with CUDA have a working one; elsewhere the constructor throws
// loom::Error saying loom was built without CUDA (the header compiles
// everywhere: no CUDA or NCCL type appears in it).
//
// Design notes:
// * Communicators.  One NCCL communicator per CUDA device this process uses
//   with the group, created lazily by the first collective on that device
//   (as PyTorch does).  Rank 0 makes the unique id (ncclGetUniqueId) and
//   publishes it in the store under "nccl/<instance>/comm<k>" (k counts the
//   communicators the group has made, the same on every rank, so ranks that
//   use different device indices still meet); the others get it.  NCCL does
//   not let two ranks of one communicator share a GPU: give every rank its
//   own device (with loomrun / spawn: cuda:LOCAL_RANK).
// * Streams.  Each communicator has its own NCCL stream.  A collective is
//   ordered after the work the caller queued before it: an event recorded
//   on the caller's current stream (cuda::current_stream_handle) is waited
//   for by the NCCL stream; an end event is recorded after the collective.
//   Every tensor the collective touches is record_stream'ed on the NCCL
//   stream, so the caching allocator does not hand its memory out again
//   before the collective has finished, even if the caller drops it.
// * Work.  wait() makes the caller's current stream wait for the end event
//   and returns at once (no host blocking, like PyTorch): later kernels on
//   that stream see the result; to read it on the host, copy it (copies to
//   the host synchronise).  With blocking_wait (or LOOM_NCCL_BLOCKING_WAIT=1)
//   wait() instead blocks the host until the collective has finished and
//   throws its error.  barrier().wait() always blocks the host.
//   is_completed() queries the end event.  wait() on a work that has failed
//   throws its error.
// * Timeouts and dead peers.  Communicators are non-blocking (config.blocking
//   = 0), so neither creating one nor enqueueing on one can hang the caller.
//   A watchdog thread polls the in-flight collectives: one still running
//   past timeout() aborts its communicator (ncclCommAbort, which makes the
//   kernels return) and fails with a loom::Error naming the collective, the
//   rank and the timeout; an asynchronous NCCL error (ncclCommGetAsyncError:
//   e.g. a peer that died, when the transport notices) aborts at once.  After
//   either the group is broken: later collectives throw at once saying why;
//   make a new group.  A peer that never shows up for communicator creation
//   fails the same way after the timeout.
// * Semantics as gloo (ProcessGroup.h), with these differences: there is no
//   cross-rank consistency check (ranks that pass different sizes get
//   undefined results or a timeout, as with NCCL anywhere); send/recv tags
//   are accepted but not matched (messages between two ranks arrive in issue
//   order, as in PyTorch's nccl backend); a recv of a size other than the
//   send's is undefined.  Bool tensors reduce as uint8 with sum/max = or,
//   product/min = and; avg (ncclAvg) needs a floating dtype, as with gloo.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "distributed/ProcessGroup.h"
#include "distributed/store/Store.h"

namespace loom {
namespace distributed {

struct ProcessGroupNcclOptions {
  // Every collective (communicator creation included) must finish within
  // this; 30 min like torch.distributed.
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // The CUDA device of collectives without tensors (barrier) and of
  // device_for(); -1: the device of the last collective, else LOCAL_RANK
  // modulo the visible devices when the launcher set LOCAL_RANK, else the
  // calling thread's current device.
  int device = -1;
  // wait() blocks the host until the collective finished (and throws its
  // error) instead of only ordering the caller's stream after it.  Also
  // turned on by the environment variable LOOM_NCCL_BLOCKING_WAIT=1.
  bool blocking_wait = false;
  // How often the watchdog looks at the in-flight collectives.
  std::chrono::milliseconds poll_interval{20};

  ProcessGroupNcclOptions& set_timeout(std::chrono::milliseconds t) { timeout = t; return *this; }
  ProcessGroupNcclOptions& set_device(int d) { device = d; return *this; }
  ProcessGroupNcclOptions& set_blocking_wait(bool b) { blocking_wait = b; return *this; }
};

class ProcessGroupNccl : public ProcessGroup {
 public:
  // Rank `rank` of `size`, meeting the others through `store` (every rank
  // must use the same store and size).  Cheap: communicators are made by the
  // first collective on each device.  Throws loom::Error on bad arguments, in
  // a build without CUDA, or when no GPU is visible.
  ProcessGroupNccl(std::shared_ptr<Store> store, int rank, int size,
                   ProcessGroupNcclOptions options = ProcessGroupNcclOptions());
  // Waits (up to the timeout) for in-flight collectives, then destroys the
  // communicators (aborts them when the group is broken).  Never throws.
  ~ProcessGroupNccl() override;

  std::string backend() const override { return "nccl"; }
  const ProcessGroupNcclOptions& options() const { return options_; }
  // The CUDA device of collectives without tensors (see options.device).
  int device() const;
  Device device_for(Device hint) const override;
  // True once a collective has failed (timeout, NCCL error).
  bool is_broken() const;

  // See ProcessGroup.h; every tensor must be a contiguous CUDA tensor, all
  // of one collective on the same device.  Argument errors throw at once.
  WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) override;
  WorkPtr broadcast(Tensor& tensor, int root) override;
  WorkPtr reduce(Tensor& tensor, int root, ReduceOp op = ReduceOp::Sum) override;
  WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input) override;
  WorkPtr all_gather_into_tensor(Tensor& output, const Tensor& input) override;
  WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, int root) override;
  WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) override;
  WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                         ReduceOp op = ReduceOp::Sum) override;
  WorkPtr all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) override;
  WorkPtr barrier() override;
  WorkPtr send(const Tensor& tensor, int dst, int tag = 0) override;
  WorkPtr recv(Tensor& tensor, int src, int tag = 0) override;

  struct Impl;  // CUDA/NCCL state, defined in ProcessGroupNccl.cpp

 private:
  ProcessGroupNcclOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace distributed
}  // namespace loom
