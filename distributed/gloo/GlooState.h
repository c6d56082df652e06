// The state behind ProcessGroupGloo (distributed/ProcessGroupGloo.h), shared
// by its source files: ProcessGroupGloo.cpp (construction), gloo/Worker.cpp
// (the queue and the workers that run collectives), gloo/Collectives.cpp (the
// collectives) and gloo/PointToPoint.cpp (send and recv).  Private to them.
//
// A collective is checked in the calling thread, described by a Task and
// queued (ProcessGroupGloo::enqueue) to worker seq % threads; the worker runs
// the consistency check and then the Task (Worker::loop), and finishes the
// Task's Work with the error, if any.  Shared holds what the workers, the
// point-to-point helper threads and the group all read: the Gloo contexts,
// the options, and whether the group is broken.
//
// Design note (timeouts and dead peers).  Every collective (the check
// included) must finish within timeout(); past it wait() throws loom::Error
// naming the collective, the rank and the timeout.  A peer that dies closes
// its sockets and the collective fails at once with an error saying so
// (Shared::fatal).  After either the group is broken (Gloo has closed its
// connections): later collectives fail fast saying so (check_healthy); make
// a new group.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "distributed/CollectiveChecks.h"
#include "distributed/ProcessGroupGloo.h"
#include "distributed/gloo/ConsistencyCheck.h"
#include "tensor/Stream.h"

namespace loom {
namespace distributed {
namespace gloo_glue {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using ContextPtr = std::shared_ptr<::gloo::Context>;

// The name in argument errors, and where the group takes tensors (argument
// checks shared with nccl: distributed/CollectiveChecks.h, GatherScatter.h).
constexpr const char* kWho = "ProcessGroupGloo";
#ifdef LOOM_WITH_CUDA
constexpr checks::Placement kPlacement = checks::Placement::kCpuOrCuda;
#else
constexpr checks::Placement kPlacement = checks::Placement::kCpuOnly;
#endif

// The time left until deadline, for a Gloo call's timeout (at least 1 ms).
inline milliseconds remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  return std::max(left, milliseconds(1));
}

}  // namespace gloo_glue

struct ProcessGroupGloo::Shared {
  using Clock = gloo_glue::Clock;

  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  bool check = true;
  size_t small_bytes = 0;   // options.small_message_bytes rounded up to 8
  size_t record_bytes = 0;  // the check record's payload area: min(small_bytes, kRecordPayload)
  std::shared_ptr<::gloo::transport::Device> device;
  std::vector<std::shared_ptr<::gloo::Context>> contexts;

  std::mutex mutex;
  std::string broken;  // the first fatal error; empty while healthy

  std::string broken_message() {
    std::lock_guard<std::mutex> lock(mutex);
    return broken;
  }
  void set_broken(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (broken.empty()) broken = message;
  }
  // Throws when the group is broken.
  void check_healthy(const std::string& description) {
    const std::string first = broken_message();
    LOOM_CHECK(first.empty(), "ProcessGroupGloo: cannot run ", description,
               ": the group is broken by an earlier failure (", first,
               "); destroy it and create a new process group");
  }

  // Turns an exception from gloo into a loom::Error naming the operation, and
  // marks the group broken (gloo closes its connections on such errors).
  Error fatal(const std::string& description, const std::exception& e,
              Clock::time_point deadline) {
    const std::string text = e.what();
    std::string message;
    if (text.find("imeout") != std::string::npos || text.find("Timed out") != std::string::npos ||
        Clock::now() >= deadline) {
      message = "ProcessGroupGloo: " + description + " timed out after " +
                std::to_string(timeout.count()) +
                " ms (a peer may have died or skipped this collective)";
    } else {
      message = "ProcessGroupGloo: " + description +
                " failed: lost the connection to a peer (did a peer process die or destroy "
                "its process group?): " + text;
    }
    set_broken(message);
    return Error(message);
  }

  // Runs fn; returns null, or what it threw as the error to finish a Work
  // with: a loom::Error as it is, another exception (from gloo) through
  // fatal(), which breaks the group.
  template <typename Fn>
  std::exception_ptr capture(const std::string& description, Clock::time_point deadline,
                             Fn&& fn) {
    try {
      fn();
      return nullptr;
    } catch (const Error&) {
      return std::current_exception();
    } catch (const std::exception& e) {
      return std::make_exception_ptr(fatal(description, e, deadline));
    } catch (...) {
      return std::make_exception_ptr(
          Error("ProcessGroupGloo: " + description + " failed with an unknown exception"));
    }
  }
};

// One queued collective.
struct ProcessGroupGloo::Task {
  using Clock = gloo_glue::Clock;

  gloo_glue::Signature sig;
  std::string description;
  bool after_all = false;  // barrier: wait for every earlier collective
  // The byte ranges it reads or writes (ordering across workers).
  std::vector<std::pair<const char*, const char*>> memory;
  // CUDA tensors: events recorded on the caller's current stream when the
  // collective was issued; the worker waits for them before it stages the
  // tensors through host memory (on its own thread's stream).
  std::vector<Event> ready;
  std::vector<WorkPtr> after;
  // Runs the collective on ctx within the deadline.
  std::function<void(const gloo_glue::ContextPtr&, uint32_t tag, Clock::time_point deadline)> run;
  // The small-message path (Worker.cpp, "Small messages"): a collective that
  // can complete from every rank's `payload_bytes` (> 0) bytes sets these.
  // put writes this rank's bytes; take reads rank r's at gathered + r *
  // stride.  Used instead of run when payload_bytes <= Shared::small_bytes
  // and size > 1: inside the check's records when it fits their payload area
  // (record_bytes), else as an all-gather of its own after the check.
  size_t payload_bytes = 0;
  std::function<void(char* payload)> put;
  std::function<void(const char* gathered, size_t stride)> take;
  WorkPtr work;
  uint64_t seq = 0;
};

// An unfinished collective and the memory it touches.
struct ProcessGroupGloo::InFlight {
  WorkPtr work;
  std::vector<std::pair<const char*, const char*>> memory;
};

// One worker thread with its own Gloo context (gloo/Worker.cpp).
struct ProcessGroupGloo::Worker {
  using Clock = gloo_glue::Clock;

  std::shared_ptr<::gloo::Context> context;
  std::shared_ptr<Shared> shared;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Task>> queue;
  bool stop = false;
  uint32_t next_tag = 1;  // 0 is the consistency check's

  // Runs the queued tasks until stop is set and the queue is empty.
  void loop();

 private:
  // The small-message path without the check: one all-gather of every
  // rank's payload, then the task completes from it.
  void gather_payloads(const Task& task, uint32_t tag, Clock::time_point deadline);
  // The consistency check's exchange; when `small`, it carries the task's
  // payload too and the task completes from the gathered records.
  void exchange_signatures(const Task& task, Clock::time_point deadline, bool small);

  // Reused buffers of the exchanges (this worker's only).
  std::vector<int64_t> mine_buffer, all_buffer;
};

}  // namespace distributed
}  // namespace loom
