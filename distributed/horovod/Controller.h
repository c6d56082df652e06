// Controller: hvd's background thread, Horovod's coordinator in small.
//
// Every hvd operation (the tensor ops, DistributedOptimizer's gradient
// all-reduces, broadcast_parameters) is queued here, from any thread, and
// only this thread issues collectives, so all ranks issue the same ones in
// the same order whatever order their threads (autograd hooks on several
// device threads, the main thread) submitted them in.  It runs rounds:
//
//   wait until something is queued, or join() was called
//   pace: at least cycle_time since the last round, and since the oldest
//         queued request was submitted (Horovod's cycle time: the gradients
//         of one backward that are ready within a cycle fuse), longer
//         (doubling, up to 64 ms) after a round that matched nothing
//   negotiate: all-gather one Record per rank on the CPU group, plan the
//         round (distributed/horovod/Negotiation.h: match by name, check,
//         fuse)
//   execute: the planned groups' collectives, in plan order
//            (distributed/horovod/Execute.h); handles get their works
//   fail: entries the ranks disagree on; with a stall, the unmatched ones
//
// A rank with nothing queued sends no record, so the others wait in the
// all-gather until it submits or joins: an idle rank costs nothing, and a
// rank that never submits makes the others fail after the process group's
// timeout.  join() puts this rank into the joined state once its queue is
// empty; it then takes part in every round with neutral data until all
// ranks have joined.  A failed negotiation (a timeout, a dead peer) stops
// the controller: queued and later operations fail with its error.
//
//   timeline of one rank (2 ranks, backward produces g3, g2, g1):
//     hooks     : g3 ....... g2 .. g1
//     controller: [pace][negotiate {g3}][allreduce g3][pace][negotiate {g2,g1}][allreduce g2+g1]
//     step()    :                                                              wait(g3,g2,g1)
//
// Private to distributed/horovod (Basics.cpp owns the one instance).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "distributed/ProcessGroup.h"
#include "distributed/horovod/Execute.h"
#include "distributed/horovod/Handle.h"
#include "distributed/horovod/Request.h"

namespace loom {
namespace distributed {
namespace horovod {

// What the controller has done since it started (this rank's view).
struct ControllerStats {
  int64_t submitted = 0;         // operations queued
  int64_t rounds = 0;            // negotiation rounds (record all-gathers)
  int64_t fused_operations = 0;  // planned groups run: one payload collective each
  int64_t tensors = 0;           // operations run in them (joined: the others')
};

struct ControllerOptions {
  // Bytes per fused collective; 0: no fusion.  Same on every rank (checked).
  int64_t fusion_threshold = int64_t(128) << 20;
  // Least time between two rounds.
  std::chrono::microseconds cycle_time{1000};
  // Print a warning once a request has waited this long for the other ranks
  // to submit it (0: never).
  std::chrono::milliseconds stall_warning{60000};
  // Fail requests (on every rank) once one has waited this long (0: never).
  std::chrono::milliseconds stall_timeout{0};
};

class Controller {
 public:
  // cpu_group negotiates and carries CPU payloads (and CUDA ones when
  // cuda_group is null); cuda_group (nccl, may be null) carries CUDA
  // payloads.  Both span every rank.  Starts the thread.
  Controller(ProcessGroupPtr cpu_group, ProcessGroupPtr cuda_group, ControllerOptions options);
  // Stops the thread (after the round it is in) and fails whatever is still
  // queued with "hvd was shut down".
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Queues request (its state must be set); returns its handle.  Throws
  // loom::Error when the controller has stopped (naming why) or when a
  // queued request has the same name.
  Handle submit(std::unique_ptr<Request> request);
  // Blocks until every rank has joined; returns the last rank to join.
  // Throws when the controller stops meanwhile, or when another thread is
  // already joining.
  int join();

  // A name for an unnamed operation: "<kind>.noname.<n>", n counting per
  // process, so ranks that submit unnamed operations in the same order agree.
  std::string auto_name(OpKind kind);

  ControllerStats stats();

  int rank() const { return exec_.rank; }
  int size() const { return exec_.size; }
  const ControllerOptions& options() const { return options_; }
  const ProcessGroupPtr& cpu_group() const { return exec_.cpu_group; }
  const ProcessGroupPtr& cuda_group() const { return exec_.cuda_group; }

 private:
  void loop();
  // One negotiation round; returns whether anything was matched.
  bool run_round();
  void stop_with(const std::string& message);
  void warn_stalls(const std::vector<Record>& records, const std::vector<Request*>& listed);

  ExecContext exec_;
  ControllerOptions options_;

  std::mutex mutex_;
  std::condition_variable cv_;         // queue, join, stop
  std::deque<std::unique_ptr<Request>> queue_;
  std::unordered_set<std::string> queued_names_;
  bool stop_ = false;
  std::string broken_;                 // why the controller stopped (empty while running)
  bool join_requested_ = false;
  bool join_first_round_ = false;      // the next joined round is this rank's first
  bool join_done_ = false;
  int join_result_ = -1;
  int64_t unnamed_ = 0;
  // Controller thread only: the names the reference rank listed last round.
  std::unordered_set<uint64_t> wanted_;
  ControllerStats stats_;

  std::thread thread_;
};

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
