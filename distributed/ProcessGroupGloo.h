// ProcessGroupGloo: loom's CPU collectives, run by Gloo over TCP.
//
// Construction connects a full mesh of TCP pairs among the ranks through the
// store (each rank publishes its address, then waits for everyone else's).
// Collectives are checked in the calling thread (dtype, sizes, contiguity,
// root, number of tensors; loom::Error at once), then queued in issue order to
// worker threads that run them with Gloo; the returned Work finishes when the
// collective has, with the error (loom::Error) if it failed.
//
// What a caller can rely on (the design notes that say how are next to the
// code, named here):
// * Order.  Collectives run on `threads` workers, two possibly at the same
//   time, but with results as if run in issue order; barrier() waits for
//   every earlier collective.  (gloo/Worker.cpp, "Workers".)
// * Consistency check.  Gloo aborts the process when ranks pass different
//   sizes; instead, before each collective the ranks exchange a description
//   of it and all fail with one clear loom::Error when they disagree; the
//   group stays usable.  It costs one small message round per collective;
//   turn it off with check_consistency = false only when the program is
//   known to be uniform.  (gloo/ConsistencyCheck.h.)
// * Small messages.  all_reduce, broadcast and the all-gathers of at most
//   small_message_bytes per rank run as one all-gather of every rank's
//   bytes, each rank reducing in rank order (identical results everywhere);
//   up to 4 KiB inside the consistency check's own exchange.  Every rank must
//   use the same small_message_bytes.  (gloo/Worker.cpp, "Small messages".)
// * Timeouts and dead peers.  Every collective (the check included) must
//   finish within timeout(); past it wait() throws loom::Error naming the
//   collective, the rank and the timeout.  A peer that dies closes its sockets
//   and the collective fails at once with an error saying so.  After either
//   the group is broken (Gloo has closed its connections): later collectives
//   fail fast saying so; make a new group.  The constructor sets SIGPIPE to
//   ignored when it still has its default action, as Python does.
//   (gloo/GlooState.h; ProcessGroupGloo.cpp, "SIGPIPE".)
// * Memory.  Contiguous CPU tensors are reduced and received in place; lists
//   of tensors go through one scratch buffer unless they lie back to back.
//   CUDA tensors (builds with CUDA) are staged through pinned host memory,
//   after the work queued before the collective on the caller's stream.
//   (gloo/HostStaging.h.)
// * Transport thread.  Gloo's socket loop thread runs under SCHED_BATCH
//   (batch_transport_thread), which keeps a busy machine from stalling small
//   collectives.  (ProcessGroupGloo.cpp, "Transport thread".)
// * Point to point.  send completes once the receiver has taken the data; a
//   size or dtype mismatch is a loom::Error on the receiver (the data is
//   drained), not an abort.  Messages between two ranks with the same tag
//   arrive in order.  (gloo/PointToPoint.cpp.)
//
// ReduceOp::Avg is sum then divide, for floating dtypes only (an integer avg
// throws: reduce with sum and divide as you need).  Bool: sum/max = or,
// product/min = and.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/ProcessGroup.h"
#include "distributed/store/Store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace loom {
namespace distributed {

struct ProcessGroupGlooOptions {
  // Every collective (and the connection set-up) must finish within this;
  // 30 min like torch.distributed.
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // The address to bind: an interface name ("eth0", "lo") or a host
  // name / IP address of this machine.  The environment variables
  // LOOM_GLOO_SOCKET_IFNAME, then GLOO_SOCKET_IFNAME, when set, name the
  // interface instead.
  std::string interface_or_host = "127.0.0.1";
  // Worker threads (each with its own Gloo connections); >= 1.
  int threads = 2;
  // Exchange a description of each collective first, so mismatches across
  // ranks are errors rather than aborts ("Consistency check" above).
  bool check_consistency = true;
  // all_reduce, broadcast and all-gathers of at most this many bytes per rank
  // take one all-gather instead of Gloo's algorithm ("Small messages"
  // above).  Rounded up to a multiple of 8; at most 16 MiB; 0 turns it
  // off.
  size_t small_message_bytes = 64 * 1024;
  // Run Gloo's transport loop thread under SCHED_BATCH ("Transport thread"
  // above; Linux only).  Only the policy of a thread this
  // constructor starts is changed, and only when the constructing thread
  // runs under the default policy.
  bool batch_transport_thread = true;

  ProcessGroupGlooOptions& set_timeout(std::chrono::milliseconds t) { timeout = t; return *this; }
  ProcessGroupGlooOptions& set_interface_or_host(std::string s) { interface_or_host = std::move(s); return *this; }
  ProcessGroupGlooOptions& set_threads(int n) { threads = n; return *this; }
  ProcessGroupGlooOptions& set_check_consistency(bool b) { check_consistency = b; return *this; }
  ProcessGroupGlooOptions& set_small_message_bytes(size_t n) { small_message_bytes = n; return *this; }
  ProcessGroupGlooOptions& set_batch_transport_thread(bool b) { batch_transport_thread = b; return *this; }
};

class ProcessGroupGloo : public ProcessGroup {
 public:
  // Connects rank `rank` of `size` through `store` (every rank must call
  // this with the same store, size and options).  Blocks until all ranks have
  // connected; throws loom::Error on bad arguments, or when the rendezvous or
  // a connection fails or times out (naming the rank and what it waited for).
  ProcessGroupGloo(std::shared_ptr<Store> store, int rank, int size,
                   ProcessGroupGlooOptions options = ProcessGroupGlooOptions());
  // Finishes the queued collectives and outstanding sends/recvs (each within
  // the timeout at most; at once when the group is broken), then closes the
  // connections.
  ~ProcessGroupGloo() override;

  std::string backend() const override { return "gloo"; }
  const ProcessGroupGlooOptions& options() const { return options_; }
  // True once a collective has failed by timeout or a lost connection.
  bool is_broken() const;

  // See ProcessGroup.h for what each collective does; all check their
  // arguments at once and throw loom::Error.
  WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) override;
  WorkPtr broadcast(Tensor& tensor, int root) override;
  WorkPtr reduce(Tensor& tensor, int root, ReduceOp op = ReduceOp::Sum) override;
  WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input) override;
  WorkPtr all_gather_into_tensor(Tensor& output, const Tensor& input) override;
  WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, int root) override;
  WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) override;
  WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                         ReduceOp op = ReduceOp::Sum) override;
  // Sizes may differ per pair of ranks: outputs[r] on rank i must have as
  // many elements as inputs[i] on rank r.
  WorkPtr all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) override;
  WorkPtr barrier() override;
  // tag: >= 0 and < 2^31.
  WorkPtr send(const Tensor& tensor, int dst, int tag = 0) override;
  WorkPtr recv(Tensor& tensor, int src, int tag = 0) override;

  // Defined in distributed/gloo/GlooState.h (private to the group's sources).
  struct Task;
  struct Worker;
  struct Shared;

 private:
  // Queues a checked collective to its worker (gloo/Worker.cpp).
  WorkPtr enqueue(std::shared_ptr<Task> task);
  // Runs a point-to-point helper thread, joining finished ones.
  void spawn_p2p(std::function<void()> fn);

  ProcessGroupGlooOptions options_;
  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::mutex enqueue_mutex_;
  uint64_t next_seq_ = 0;
  // Unfinished collectives and the memory they touch (for ordering across
  // workers).
  struct InFlight;
  std::vector<std::shared_ptr<InFlight>> in_flight_;
  // Helper threads of point-to-point operations.
  std::mutex p2p_mutex_;
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> p2p_threads_;
};

}  // namespace distributed
}  // namespace loom
