// The state behind ProcessGroupNccl (distributed/ProcessGroupNccl.h),
// shared by its two source files: ProcessGroupNccl.cpp (construction,
// communicators, the watchdog) and nccl/Collectives.cpp (the collectives).
// Private to them, and for CUDA builds only: it includes cuda_runtime.h and
// nccl.h.
//
// Ordering, in one place: a collective is launched under the group's mutex
// as
//   caller stream:  ... producer kernels ..., [staging copies], record(start)
//   NCCL stream:    wait(start), NCCL kernels, record(end)
// and record_stream(t, NCCL stream) for every tensor it touches.  wait()
// makes the caller's stream (at the time of the wait, on the waiting thread)
// wait(end).  The watchdog only ever queries `end` and the communicator's
// async error; it finishes the Work (running completion callbacks) outside
// the mutex.
#pragma once

#ifndef LOOM_WITH_CUDA
#error "distributed/nccl/NcclState.h needs the CUDA toolkit (LOOM_WITH_CUDA is not defined)"
#endif

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "distributed/CollectiveChecks.h"
#include "distributed/ProcessGroupNccl.h"
#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"

namespace loom {
namespace distributed {
namespace nccl_glue {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kWho = "ProcessGroupNccl";
constexpr checks::Placement kPlacement = checks::Placement::kCudaOnly;

inline void check_cuda_tensor(const char* op, const Tensor& t, const std::string& name) {
  checks::check_tensor(kWho, op, t, name, kPlacement);
}

// "all_reduce (sum) of 1024 float32 on rank 1 of 2" (as gloo's).
inline std::string describe(const char* kind, const char* op, const Tensor& t, int root, int rank,
                     int size) {
  std::ostringstream out;
  out << kind;
  if (op != nullptr) out << " (" << op << ")";
  if (t.defined()) out << " of " << t.numel() << " " << dtype_name(t.dtype());
  if (root >= 0) out << " with root " << root;
  out << " on rank " << rank << " of " << size;
  return out.str();
}



inline ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case kFloat32: return ncclFloat32;
    case kFloat64: return ncclFloat64;
    case kInt64: return ncclInt64;
    case kInt32: return ncclInt32;
    case kUInt8: return ncclUint8;
    case kBool: return ncclUint8;  // one byte, 0 or 1
    case kFloat16: return ncclFloat16;
    case kBFloat16: return ncclBfloat16;
  }
  LOOM_FAIL("ProcessGroupNccl: unsupported dtype ", dtype_name(dtype));
}

inline ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  if (dtype == kBool) {
    // Bytes that are 0 or 1: max is or, min is and (a sum could give 2).
    if (op == ReduceOp::Sum || op == ReduceOp::Max) return ncclMax;
    if (op == ReduceOp::Product || op == ReduceOp::Min) return ncclMin;
  }
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Product: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
  }
  LOOM_FAIL("ProcessGroupNccl: unknown reduce op ", static_cast<int>(op));
}

inline cudaStream_t as_stream(uint64_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

// A CUDA event without timing, destroyed with its owner (destroying an event
// whose work is still queued is allowed; CUDA releases it once done).
struct OwnedEvent {
  cudaEvent_t event = nullptr;
  OwnedEvent() { LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming)); }
  ~OwnedEvent() {
    if (event) cudaEventDestroy(event);
  }
  OwnedEvent(const OwnedEvent&) = delete;
  OwnedEvent& operator=(const OwnedEvent&) = delete;
};

// The Work of one NCCL collective.  The watchdog finishes it (exactly once,
// through complete()); wait() orders the caller's stream after it.
class WorkNccl : public Work {
 public:
  WorkNccl(std::string description, int device, bool host_blocking)
      : Work(std::move(description)), device_(device), host_blocking_(host_blocking) {}

  bool is_completed() override {
    if (Work::is_completed()) return true;
    // Done on the GPU; the watchdog will finish it (and report an async
    // NCCL error, should there be one) within a poll interval.
    return cudaEventQuery(end_.event) == cudaSuccess;
  }

  void wait() override {
    if (host_blocking_) {
      Work::wait();  // throws the error, if any
    } else {
      std::lock_guard<std::mutex> lock(mutex_);
      if (done_ && error_) std::rethrow_exception(error_);
    }
    cuda::DeviceGuard guard(device_);
    LOOM_CUDA_CHECK(
        cudaStreamWaitEvent(as_stream(cuda::current_stream_handle(device_)), end_.event, 0));
  }

  // Finishes once; later calls are ignored.
  void complete(std::exception_ptr error) {
    bool expected = false;
    if (!completed_.compare_exchange_strong(expected, true)) return;
    finish(error);
  }

  cudaEvent_t end() const { return end_.event; }
  int device() const { return device_; }

 private:
  int device_;
  bool host_blocking_;
  OwnedEvent end_;
  std::atomic<bool> completed_{false};
};

}  // namespace nccl_glue

using nccl_glue::as_stream;
using nccl_glue::Clock;
using nccl_glue::OwnedEvent;
using nccl_glue::WorkNccl;
using std::chrono::milliseconds;

struct ProcessGroupNccl::Impl {
  struct Comm {
    int device = 0;
    ncclComm_t comm = nullptr;
    // Never destroyed once a collective ran on it: the allocator may record
    // events on it when tensors it touched are freed, after the group.
    cudaStream_t stream = nullptr;
  };
  struct Pending {
    std::shared_ptr<WorkNccl> work;
    Clock::time_point deadline;
  };

  std::shared_ptr<Store> store;
  std::string prefix;  // "nccl/<instance>/"
  int rank = 0;
  int size = 1;
  milliseconds timeout{0};
  milliseconds poll{20};
  bool blocking_wait = false;
  int fixed_device = -1;

  mutable std::mutex mutex;
  std::map<int, Comm> comms;  // by local device index
  int comms_made = 0;
  int last_device = -1;
  std::vector<Pending> pending;
  std::string broken;  // the first fatal error; empty while healthy
  // Works failed by a launch that broke the group, for the watchdog to finish.
  std::vector<std::pair<std::shared_ptr<WorkNccl>, std::exception_ptr>> orphans;

  std::thread watchdog;
  std::condition_variable cv;
  bool stop = false;

  // ---- errors (caller holds mutex) ----------------------------------------------------

  void check_healthy(const std::string& what) const {
    LOOM_CHECK(broken.empty(), "ProcessGroupNccl: cannot run ", what,
               ": the group is broken by an earlier failure (", broken,
               "); destroy it and create a new process group");
  }

  // Aborts every communicator, records `message` as the group's failure and
  // returns the pending works (to fail outside the mutex).
  std::vector<Pending> break_group(const std::string& message) {
    if (broken.empty()) broken = message;
    for (auto& [device, c] : comms) {
      if (c.comm != nullptr) {
        ncclCommAbort(c.comm);
        c.comm = nullptr;
      }
    }
    std::vector<Pending> failed;
    failed.swap(pending);
    return failed;
  }

  // Waits until a non-blocking communicator's last call has taken effect;
  // returns its state (ncclInProgress when the deadline passed first).
  static ncclResult_t wait_ready(ncclComm_t comm, Clock::time_point deadline) {
    ncclResult_t state = ncclInProgress;
    for (;;) {
      if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
      if (state != ncclInProgress || Clock::now() >= deadline) return state;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Checks the result of an NCCL call on comm; an error breaks the group.
  void check_call(ncclResult_t result, ncclComm_t comm, const char* call, const std::string& what,
                  Clock::time_point deadline) {
    if (result == ncclInProgress) result = wait_ready(comm, deadline);
    if (result == ncclSuccess) return;
    std::string message;
    if (result == ncclInProgress) {
      message = "ProcessGroupNccl: " + what + " timed out after " +
                std::to_string(timeout.count()) + " ms in " + call +
                " (a peer may have died or skipped this collective)";
    } else {
      message = "ProcessGroupNccl: " + what + " failed in " + call + ": NCCL error " +
                ncclGetErrorString(result) + " (" + ncclGetLastError(comm) + ")";
    }
    // The watchdog fails the works in flight (outside the mutex).
    for (auto& p : break_group(message))
      orphans.emplace_back(p.work, std::make_exception_ptr(Error(
                                       "ProcessGroupNccl: " + p.work->description() +
                                       " aborted: " + message)));
    cv.notify_all();
    throw Error(message);
  }

  // ---- communicators (caller holds mutex) -----------------------------------------------

  Comm& comm_for(int device, const std::string& what, Clock::time_point deadline) {
    auto it = comms.find(device);
    if (it != comms.end()) return it->second;
    const std::string key = prefix + "comm" + std::to_string(comms_made++);
    ncclUniqueId id;
    try {
      if (rank == 0) {
        LOOM_CUDA_CHECK(ncclGetUniqueId(&id));
        const auto* p = reinterpret_cast<const uint8_t*>(&id);
        store->set(key, Bytes(p, p + sizeof(id)));
      } else {
        const Bytes bytes = store->get(key);
        LOOM_CHECK(bytes.size() == sizeof(id), "got a ", bytes.size(), "-byte NCCL unique id, "
                   "expected ", sizeof(id), " (is every rank running the same loom?)");
        std::memcpy(&id, bytes.data(), sizeof(id));
      }
    } catch (const std::exception& e) {
      LOOM_FAIL("ProcessGroupNccl: ", what, ": cannot exchange the NCCL unique id of cuda:",
                device, " through the store (key '", key, "'; rank 0 publishes it when it "
                "issues its first collective): ", e.what());
    }
    cuda::DeviceGuard guard(device);
    Comm c;
    c.device = device;
    LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t result = ncclCommInitRankConfig(&c.comm, size, id, rank, &config);
    if (result == ncclInProgress || result == ncclSuccess) result = wait_ready(c.comm, deadline);
    if (result != ncclSuccess) {
      const std::string why =
          result == ncclInProgress
              ? "timed out after " + std::to_string(timeout.count()) +
                    " ms waiting for all " + std::to_string(size) +
                    " ranks (did every rank issue this collective, each on its own GPU?)"
              : std::string("NCCL error ") + ncclGetErrorString(result) + " (" +
                    ncclGetLastError(c.comm) + "; NCCL cannot put two ranks on one GPU: give "
                    "every rank its own device)";
      if (c.comm != nullptr) ncclCommAbort(c.comm);
      cudaStreamDestroy(c.stream);
      const std::string message = "ProcessGroupNccl: " + what +
                                  " could not create its NCCL communicator on cuda:" +
                                  std::to_string(device) + ": " + why;
      if (broken.empty()) broken = message;
      throw Error(message);
    }
    return comms.emplace(device, c).first->second;
  }

  int current_device() const {
    if (fixed_device >= 0) return fixed_device;
    if (last_device >= 0) return last_device;
    // Launched by loomrun / spawn: one GPU per local rank, as PyTorch guesses.
    if (const char* local = std::getenv("LOCAL_RANK")) {
      const int n = cuda::device_count();
      const int r = std::atoi(local);
      if (n > 0 && r >= 0) return r % n;
    }
    return cuda::current_device();
  }

  // ---- launching ----------------------------------------------------------------------

  // Runs body(comm, stream) on the NCCL stream of `device`, ordered after the
  // caller's stream; returns its Work.  `touched`: every tensor it reads or
  // writes (record_stream'ed).
  WorkPtr launch(const std::string& what, int device, const std::vector<Tensor>& touched,
                 bool host_blocking,
                 const std::function<void(ncclComm_t, cudaStream_t, Clock::time_point)>& body) {
    std::lock_guard<std::mutex> lock(mutex);
    auto work = std::make_shared<WorkNccl>(what, device, host_blocking || blocking_wait);
    // Failures past the argument checks (a broken group, a communicator that
    // cannot be made in time, an NCCL error) go into the Work, as with gloo:
    // wait() throws them.  (An end event never recorded counts as complete.)
    try {
      check_healthy(what);
      const auto deadline = Clock::now() + timeout;
      cuda::DeviceGuard guard(device);
      Comm& c = comm_for(device, what, deadline);
      last_device = device;
      {
        OwnedEvent start;
        LOOM_CUDA_CHECK(
            cudaEventRecord(start.event, as_stream(cuda::current_stream_handle(device))));
        LOOM_CUDA_CHECK(cudaStreamWaitEvent(c.stream, start.event, 0));
      }
      body(c.comm, c.stream, deadline);
      LOOM_CUDA_CHECK(cudaEventRecord(work->end(), c.stream));
      const uint64_t nccl_stream = reinterpret_cast<uint64_t>(c.stream);
      for (const Tensor& t : touched)
        if (t.defined() && t.numel() > 0) cuda::record_stream(t.storage(), nccl_stream);
      pending.push_back({work, deadline});
    } catch (const Error&) {
      work->complete(std::current_exception());
      return work;
    }
    cv.notify_all();
    return work;
  }

  // ---- the watchdog ---------------------------------------------------------------------

  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stop) {
      cv.wait_for(lock, poll);
      if (stop) break;
      std::vector<std::pair<std::shared_ptr<WorkNccl>, std::exception_ptr>> done;
      done.swap(orphans);
      // An asynchronous error (e.g. a peer lost) fails everything at once.
      std::string async;
      for (auto& [device, c] : comms) {
        if (c.comm == nullptr) continue;
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(c.comm, &state) == ncclSuccess && state != ncclSuccess &&
            state != ncclInProgress) {
          async = std::string("NCCL reported an asynchronous error on cuda:") +
                  std::to_string(device) + ": " + ncclGetErrorString(state) + " (" +
                  ncclGetLastError(c.comm) + "; did a peer process die?)";
          break;
        }
      }
      if (!async.empty()) {
        for (auto& p : break_group("ProcessGroupNccl: " + async))
          done.emplace_back(p.work, std::make_exception_ptr(Error(
                                        "ProcessGroupNccl: " + p.work->description() +
                                        " failed: " + async)));
      }
      const auto now = Clock::now();
      std::vector<Pending> still;
      std::string timed_out;
      for (auto& p : pending) {
        const cudaError_t q = cudaEventQuery(p.work->end());
        if (q == cudaSuccess) {
          done.emplace_back(p.work, nullptr);
        } else if (q != cudaErrorNotReady) {
          cudaGetLastError();
          done.emplace_back(p.work, std::make_exception_ptr(Error(
                                        "ProcessGroupNccl: " + p.work->description() +
                                        " failed: CUDA error " + cudaGetErrorName(q) + " (" +
                                        cudaGetErrorString(q) + ")")));
        } else if (now >= p.deadline && timed_out.empty()) {
          timed_out = "ProcessGroupNccl: " + p.work->description() + " timed out after " +
                      std::to_string(timeout.count()) +
                      " ms (a peer may have died or skipped this collective); its NCCL "
                      "communicator was aborted";
          done.emplace_back(p.work, std::make_exception_ptr(Error(timed_out)));
        } else {
          still.push_back(p);
        }
      }
      pending.swap(still);
      if (!timed_out.empty()) {
        for (auto& p : break_group(timed_out))
          done.emplace_back(p.work, std::make_exception_ptr(Error(
                                        "ProcessGroupNccl: " + p.work->description() +
                                        " aborted: " + timed_out)));
      }
      if (done.empty()) continue;
      lock.unlock();
      for (auto& [work, error] : done) work->complete(error);
      lock.lock();
    }
  }
};

}  // namespace distributed
}  // namespace loom
