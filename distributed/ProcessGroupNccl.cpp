// ProcessGroupNccl (see the header for the design).  Everything that touches
// CUDA or NCCL is inside LOOM_WITH_CUDA; without it the constructor throws.
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
#include "distributed/ProcessGroupNccl.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "autograd/GradMode.h"
#include "distributed/CollectiveChecks.h"
#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"

#ifdef LOOM_WITH_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

#include "tensor/CudaMemory.h"
#include "tensor/cuda/Check.h"
#endif

namespace loom {
namespace distributed {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

#ifdef LOOM_WITH_CUDA
namespace {

constexpr const char* kWho = "ProcessGroupNccl";

void check_cuda_tensor(const char* op, const Tensor& t, const std::string& name) {
  checks::check_tensor(kWho, op, t, name, checks::Placement::kCudaOnly);
}

// "all_reduce (sum) of 1024 float32 on rank 1 of 2" (as gloo's).
std::string describe(const char* kind, const char* op, const Tensor& t, int root, int rank,
                     int size) {
  std::ostringstream out;
  out << kind;
  if (op != nullptr) out << " (" << op << ")";
  if (t.defined()) out << " of " << t.numel() << " " << dtype_name(t.dtype());
  if (root >= 0) out << " with root " << root;
  out << " on rank " << rank << " of " << size;
  return out.str();
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0);
}

}  // namespace
#endif  // LOOM_WITH_CUDA

#ifndef LOOM_WITH_CUDA

// ---- builds without CUDA ------------------------------------------------------------

struct ProcessGroupNccl::Impl {};

ProcessGroupNccl::ProcessGroupNccl(std::shared_ptr<Store> store, int rank, int size,
                                   ProcessGroupNcclOptions options)
    : ProcessGroup(rank, size, options.timeout), options_(std::move(options)) {
  (void)store;
  LOOM_FAIL("ProcessGroupNccl: the nccl backend needs CUDA, and this build of loom has none (no "
            "CUDA toolkit was found when it was compiled, or LOOM_DISABLE_CUDA=1); use backend "
            "'gloo' for CPU tensors, or rebuild loom where the CUDA toolkit and NCCL are "
            "installed");
}
ProcessGroupNccl::~ProcessGroupNccl() = default;
int ProcessGroupNccl::device() const { return -1; }
Device ProcessGroupNccl::device_for(Device hint) const { return hint; }
bool ProcessGroupNccl::is_broken() const { return true; }

#define LOOM_NCCL_UNAVAILABLE LOOM_FAIL("ProcessGroupNccl: this build of loom has no CUDA")
WorkPtr ProcessGroupNccl::all_reduce(Tensor&, ReduceOp) { LOOM_NCCL_UNAVAILABLE; }
WorkPtr ProcessGroupNccl::broadcast(Tensor&, int) { LOOM_NCCL_UNAVAILABLE; }
WorkPtr ProcessGroupNccl::reduce(Tensor&, int, ReduceOp) { LOOM_NCCL_UNAVAILABLE; }
WorkPtr ProcessGroupNccl::all_gather(std::vector<Tensor>&, const Tensor&) { LOOM_NCCL_UNAVAILABLE; }
WorkPtr ProcessGroupNccl::all_gather_into_tensor(Tensor&, const Tensor&) { LOOM_NCCL_UNAVAILABLE; }
WorkPtr ProcessGroupNccl::gather(std::vector<Tensor>&, const Tensor&, int) { LOOM_NCCL_UNAVAILABLE; }
WorkPtr ProcessGroupNccl::scatter(Tensor&, const std::vector<Tensor>&, int) { LOOM_NCCL_UNAVAILABLE; }
WorkPtr ProcessGroupNccl::reduce_scatter(Tensor&, const std::vector<Tensor>&, ReduceOp) {
  LOOM_NCCL_UNAVAILABLE;
}
WorkPtr ProcessGroupNccl::all_to_all(std::vector<Tensor>&, const std::vector<Tensor>&) {
  LOOM_NCCL_UNAVAILABLE;
}
WorkPtr ProcessGroupNccl::barrier() { LOOM_NCCL_UNAVAILABLE; }
WorkPtr ProcessGroupNccl::send(const Tensor&, int, int) { LOOM_NCCL_UNAVAILABLE; }
WorkPtr ProcessGroupNccl::recv(Tensor&, int, int) { LOOM_NCCL_UNAVAILABLE; }
#undef LOOM_NCCL_UNAVAILABLE

#else  // LOOM_WITH_CUDA

// ---- CUDA builds ----------------------------------------------------------------------

namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case kFloat32: return ncclFloat32;
    case kFloat64: return ncclFloat64;
    case kInt64: return ncclInt64;
    case kInt32: return ncclInt32;
    case kUInt8: return ncclUint8;
    case kBool: return ncclUint8;  // one byte, 0 or 1
  }
  LOOM_FAIL("ProcessGroupNccl: unsupported dtype ", dtype_name(dtype));
}

ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
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

cudaStream_t as_stream(uint64_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

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

}  // namespace

struct ProcessGroupNccl::Impl {
  struct Comm {
    int device = 0;
    ncclComm_t comm = nullptr;
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

// ---- ProcessGroupNccl --------------------------------------------------------------------

ProcessGroupNccl::ProcessGroupNccl(std::shared_ptr<Store> store, int rank, int size,
                                   ProcessGroupNcclOptions options)
    : ProcessGroup(rank, size, options.timeout), options_(std::move(options)) {
  LOOM_CHECK(store != nullptr, "ProcessGroupNccl: the store is null");
  LOOM_CHECK(size >= 1, "ProcessGroupNccl: size must be >= 1, got ", size);
  LOOM_CHECK(rank >= 0 && rank < size, "ProcessGroupNccl: rank must be in [0, ", size, "), got ",
             rank);
  LOOM_CHECK(options_.timeout.count() > 0, "ProcessGroupNccl: timeout must be positive, got ",
             options_.timeout.count(), " ms");
  LOOM_CHECK(cuda::device_count() > 0, "ProcessGroupNccl: rank ", rank,
             " sees no CUDA device (no GPU or driver, or CUDA_VISIBLE_DEVICES hides them); the "
             "nccl backend needs one GPU per rank; use backend 'gloo' on machines without GPUs");
  if (options_.device >= 0) cuda::check_device(options_.device, "ProcessGroupNccl");
  if (env_flag("LOOM_NCCL_BLOCKING_WAIT")) options_.blocking_wait = true;

  impl_ = std::make_unique<Impl>();
  Impl& s = *impl_;
  s.store = store;
  s.rank = rank;
  s.size = size;
  s.timeout = options_.timeout;
  s.poll = std::max(options_.poll_interval, milliseconds(1));
  s.blocking_wait = options_.blocking_wait;
  s.fixed_device = options_.device;
  int64_t instance = 0;
  try {
    instance = store->add("nccl/instances/rank" + std::to_string(rank), 1);
  } catch (const std::exception& e) {
    LOOM_FAIL("ProcessGroupNccl: rank ", rank, " of ", size, " cannot use the store: ", e.what());
  }
  s.prefix = "nccl/" + std::to_string(instance) + "/";
  s.watchdog = std::thread([&s] { s.watch(); });
}

ProcessGroupNccl::~ProcessGroupNccl() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stop = true;
  }
  s.cv.notify_all();
  if (s.watchdog.joinable()) s.watchdog.join();
  // Let in-flight collectives finish (within the timeout), then release the
  // communicators.  ncclCommAbort, not destroy: it never waits for peers, and
  // with nothing in flight there is nothing for it to cut short.
  std::vector<Impl::Pending> left;
  std::vector<std::pair<std::shared_ptr<WorkNccl>, std::exception_ptr>> orphans;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    left.swap(s.pending);
    orphans.swap(s.orphans);
  }
  for (auto& [work, error] : orphans) work->complete(error);
  for (auto& p : left) {
    while (s.broken.empty() && cudaEventQuery(p.work->end()) == cudaErrorNotReady &&
           Clock::now() < p.deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const bool ok = cudaEventQuery(p.work->end()) == cudaSuccess;
    cudaGetLastError();
    p.work->complete(ok ? nullptr
                        : std::make_exception_ptr(Error(
                              "ProcessGroupNccl: " + p.work->description() +
                              " was abandoned because its process group was destroyed")));
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& [device, c] : s.comms) {
    if (c.comm != nullptr) ncclCommAbort(c.comm);
    if (c.stream != nullptr) cudaStreamDestroy(c.stream);
  }
  s.comms.clear();
  cudaGetLastError();
}

int ProcessGroupNccl::device() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->current_device();
}

Device ProcessGroupNccl::device_for(Device hint) const {
  if (hint.is_cuda()) return hint;
  return Device(kCUDA, device());
}

bool ProcessGroupNccl::is_broken() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return !impl_->broken.empty();
}

// ---- collectives ---------------------------------------------------------------------------

namespace {

// The start of one buffer holding ts back to back (same dtype), or null.
char* back_to_back(const std::vector<Tensor>& ts) {
  if (ts.empty() || ts[0].numel() == 0) return nullptr;
  char* base = static_cast<char*>(ts[0].data_ptr());
  char* next = base;
  for (const Tensor& t : ts) {
    if (static_cast<char*>(t.data_ptr()) != next) return nullptr;
    next += t.nbytes();
  }
  return base;
}

// Device-to-device copy on the NCCL stream (a rank's message to itself).
void copy_on(cudaStream_t stream, const Tensor& dst, const Tensor& src) {
  if (dst.nbytes() == 0) return;
  LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                                  cudaMemcpyDeviceToDevice, stream));
}

std::vector<Tensor> with(std::vector<Tensor> ts, const Tensor& t) {
  ts.push_back(t);
  return ts;
}

}  // namespace

#define LOOM_NCCL(call) s.check_call((call), comm, #call, what, deadline)

WorkPtr ProcessGroupNccl::all_reduce(Tensor& tensor, ReduceOp op) {
  check_cuda_tensor("all_reduce", tensor, "tensor");
  checks::check_reduce_op(kWho, op, tensor.dtype());
  Impl& s = *impl_;
  const std::string what = describe("all_reduce", to_string(op).c_str(), tensor, -1, rank_, size_);
  const Tensor t = tensor;
  return s.launch(what, t.device().index, {t}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (t.numel() == 0) return;
                    LOOM_NCCL(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(),
                                            nccl_type(t.dtype()), nccl_op(op, t.dtype()), comm,
                                            stream));
                  });
}

WorkPtr ProcessGroupNccl::broadcast(Tensor& tensor, int root) {
  check_cuda_tensor("broadcast", tensor, "tensor");
  checks::check_root(kWho, "broadcast", root, size_);
  Impl& s = *impl_;
  const std::string what = describe("broadcast", nullptr, tensor, root, rank_, size_);
  const Tensor t = tensor;
  return s.launch(what, t.device().index, {t}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (t.numel() == 0) return;
                    LOOM_NCCL(ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(),
                                            nccl_type(t.dtype()), root, comm, stream));
                  });
}

WorkPtr ProcessGroupNccl::reduce(Tensor& tensor, int root, ReduceOp op) {
  check_cuda_tensor("reduce", tensor, "tensor");
  checks::check_root(kWho, "reduce", root, size_);
  checks::check_reduce_op(kWho, op, tensor.dtype());
  Impl& s = *impl_;
  const std::string what = describe("reduce", to_string(op).c_str(), tensor, root, rank_, size_);
  const Tensor t = tensor;
  // recvbuff is only written on the root: other ranks' tensors stay as they were.
  return s.launch(what, t.device().index, {t}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (t.numel() == 0) return;
                    LOOM_NCCL(ncclReduce(t.data_ptr(), t.data_ptr(), t.numel(),
                                         nccl_type(t.dtype()), nccl_op(op, t.dtype()), root, comm,
                                         stream));
                  });
}

WorkPtr ProcessGroupNccl::all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  check_cuda_tensor("all_gather", input, "input");
  checks::check_count(kWho, "all_gather", "outputs", outputs.size(), size_);
  for (size_t r = 0; r < outputs.size(); ++r) {
    const std::string name = checks::name_at("outputs", r);
    check_cuda_tensor("all_gather", outputs[r], name);
    checks::check_same(kWho, "all_gather", outputs[r], name, input, "input");
    checks::check_same_device(kWho, "all_gather", outputs[r], name, input, "input");
  }
  Impl& s = *impl_;
  const std::string what = describe("all_gather", nullptr, input, -1, rank_, size_);
  const Tensor in = input;
  const std::vector<Tensor> outs = outputs;
  return s.launch(
      what, in.device().index, with(outs, in), false,
      [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
        const size_t n = static_cast<size_t>(in.numel());
        if (n == 0) return;
        const ncclDataType_t type = nccl_type(in.dtype());
        if (char* base = back_to_back(outs)) {
          LOOM_NCCL(ncclAllGather(in.data_ptr(), base, n, type, comm, stream));
          return;
        }
        // Scattered outputs: one broadcast per rank, fused into one launch.
        LOOM_NCCL(ncclGroupStart());
        for (int r = 0; r < size_; ++r) {
          const void* send = r == rank_ ? in.data_ptr() : outs[r].data_ptr();
          LOOM_NCCL(ncclBroadcast(send, outs[r].data_ptr(), n, type, r, comm, stream));
        }
        LOOM_NCCL(ncclGroupEnd());
      });
}

WorkPtr ProcessGroupNccl::all_gather_into_tensor(Tensor& output, const Tensor& input) {
  check_cuda_tensor("all_gather_into_tensor", input, "input");
  check_cuda_tensor("all_gather_into_tensor", output, "output");
  checks::check_same_device(kWho, "all_gather_into_tensor", output, "output", input, "input");
  checks::check_all_gather_into_tensor(kWho, output, input, size_);
  Impl& s = *impl_;
  const std::string what = describe("all_gather_into_tensor", nullptr, input, -1, rank_, size_);
  const Tensor in = input, out = output;
  return s.launch(what, in.device().index, {in, out}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (in.numel() == 0) return;
                    LOOM_NCCL(ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(),
                                            nccl_type(in.dtype()), comm, stream));
                  });
}

WorkPtr ProcessGroupNccl::gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  check_cuda_tensor("gather", input, "input");
  checks::check_root(kWho, "gather", root, size_);
  const bool is_root = rank_ == root;
  std::vector<Tensor> outs;
  if (is_root) {
    checks::check_count(kWho, "gather", "outputs on the root", outputs.size(), size_);
    for (size_t r = 0; r < outputs.size(); ++r) {
      const std::string name = checks::name_at("outputs", r);
      check_cuda_tensor("gather", outputs[r], name);
      checks::check_same(kWho, "gather", outputs[r], name, input, "input");
      checks::check_same_device(kWho, "gather", outputs[r], name, input, "input");
    }
    outs = outputs;
  }
  Impl& s = *impl_;
  const std::string what = describe("gather", nullptr, input, root, rank_, size_);
  const Tensor in = input;
  return s.launch(what, in.device().index, with(outs, in), false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    const size_t n = static_cast<size_t>(in.numel());
                    if (n == 0) return;
                    const ncclDataType_t type = nccl_type(in.dtype());
                    LOOM_NCCL(ncclGroupStart());
                    if (is_root) {
                      for (int r = 0; r < size_; ++r)
                        if (r != rank_)
                          LOOM_NCCL(ncclRecv(outs[r].data_ptr(), n, type, r, comm, stream));
                    } else {
                      LOOM_NCCL(ncclSend(in.data_ptr(), n, type, root, comm, stream));
                    }
                    LOOM_NCCL(ncclGroupEnd());
                    if (is_root) copy_on(stream, outs[rank_], in);
                  });
}

WorkPtr ProcessGroupNccl::scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) {
  check_cuda_tensor("scatter", output, "output");
  checks::check_root(kWho, "scatter", root, size_);
  const bool is_root = rank_ == root;
  std::vector<Tensor> ins;
  if (is_root) {
    checks::check_count(kWho, "scatter", "inputs on the root", inputs.size(), size_);
    for (size_t r = 0; r < inputs.size(); ++r) {
      const std::string name = checks::name_at("inputs", r);
      check_cuda_tensor("scatter", inputs[r], name);
      checks::check_same(kWho, "scatter", inputs[r], name, output, "output");
      checks::check_same_device(kWho, "scatter", inputs[r], name, output, "output");
    }
    ins = inputs;
  }
  Impl& s = *impl_;
  const std::string what = describe("scatter", nullptr, output, root, rank_, size_);
  const Tensor out = output;
  return s.launch(what, out.device().index, with(ins, out), false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    const size_t n = static_cast<size_t>(out.numel());
                    if (n == 0) return;
                    const ncclDataType_t type = nccl_type(out.dtype());
                    LOOM_NCCL(ncclGroupStart());
                    if (is_root) {
                      for (int r = 0; r < size_; ++r)
                        if (r != rank_)
                          LOOM_NCCL(ncclSend(ins[r].data_ptr(), n, type, r, comm, stream));
                    } else {
                      LOOM_NCCL(ncclRecv(out.data_ptr(), n, type, root, comm, stream));
                    }
                    LOOM_NCCL(ncclGroupEnd());
                    if (is_root) copy_on(stream, out, ins[rank_]);
                  });
}

WorkPtr ProcessGroupNccl::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                         ReduceOp op) {
  check_cuda_tensor("reduce_scatter", output, "output");
  checks::check_count(kWho, "reduce_scatter", "inputs", inputs.size(), size_);
  for (size_t r = 0; r < inputs.size(); ++r) {
    const std::string name = checks::name_at("inputs", r);
    check_cuda_tensor("reduce_scatter", inputs[r], name);
    checks::check_same(kWho, "reduce_scatter", inputs[r], name, output, "output");
    checks::check_same_device(kWho, "reduce_scatter", inputs[r], name, output, "output");
  }
  checks::check_reduce_op(kWho, op, output.dtype());
  Impl& s = *impl_;
  const std::string what =
      describe("reduce_scatter", to_string(op).c_str(), output, -1, rank_, size_);
  const Tensor out = output;
  // NCCL reduces one buffer of size * n elements: the inputs when they lie
  // back to back, else a copy made on the caller's stream (before the
  // collective's start event, so it is ordered).
  Tensor flat;
  if (out.numel() > 0 && back_to_back(inputs) == nullptr) {
    autograd::NoGradGuard no_grad;
    flat = empty({static_cast<int64_t>(size_) * out.numel()},
                 TensorOptions(out.dtype()).device(out.device()));
    for (int r = 0; r < size_; ++r)
      flat.narrow(0, r * out.numel(), out.numel()).copy_(inputs[r].reshape({-1}));
  }
  std::vector<Tensor> touched = with(inputs, out);
  if (flat.defined()) touched.push_back(flat);
  const void* send = flat.defined() ? flat.data_ptr() : (out.numel() ? inputs[0].data_ptr() : nullptr);
  return s.launch(what, out.device().index, touched, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (out.numel() == 0) return;
                    LOOM_NCCL(ncclReduceScatter(send, out.data_ptr(), out.numel(),
                                                nccl_type(out.dtype()),
                                                nccl_op(op, out.dtype()), comm, stream));
                  });
}

WorkPtr ProcessGroupNccl::all_to_all(std::vector<Tensor>& outputs,
                                     const std::vector<Tensor>& inputs) {
  checks::check_count(kWho, "all_to_all", "inputs", inputs.size(), size_);
  checks::check_count(kWho, "all_to_all", "outputs", outputs.size(), size_);
  for (int r = 0; r < size_; ++r) {
    check_cuda_tensor("all_to_all", inputs[r], checks::name_at("inputs", r));
    check_cuda_tensor("all_to_all", outputs[r], checks::name_at("outputs", r));
    checks::check_same_device(kWho, "all_to_all", inputs[r], checks::name_at("inputs", r),
                              inputs[0], "inputs[0]");
    checks::check_same_device(kWho, "all_to_all", outputs[r], checks::name_at("outputs", r),
                              inputs[0], "inputs[0]");
  }
  checks::check_all_to_all(kWho, outputs, inputs, rank_);
  Impl& s = *impl_;
  int64_t total = 0;
  for (const Tensor& t : inputs) total += t.numel();
  const std::string what = "all_to_all of " + std::to_string(total) + " " +
                           dtype_name(inputs[0].dtype()) + " sent on rank " +
                           std::to_string(rank_) + " of " + std::to_string(size_);
  const std::vector<Tensor> ins = inputs, outs = outputs;
  std::vector<Tensor> touched = ins;
  touched.insert(touched.end(), outs.begin(), outs.end());
  return s.launch(what, ins[0].device().index, touched, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    const ncclDataType_t type = nccl_type(ins[0].dtype());
                    LOOM_NCCL(ncclGroupStart());
                    for (int r = 0; r < size_; ++r) {
                      if (r == rank_) continue;
                      if (ins[r].numel() > 0)
                        LOOM_NCCL(ncclSend(ins[r].data_ptr(), ins[r].numel(), type, r, comm,
                                           stream));
                      if (outs[r].numel() > 0)
                        LOOM_NCCL(ncclRecv(outs[r].data_ptr(), outs[r].numel(), type, r, comm,
                                           stream));
                    }
                    LOOM_NCCL(ncclGroupEnd());
                    copy_on(stream, outs[rank_], ins[rank_]);
                  });
}

WorkPtr ProcessGroupNccl::barrier() {
  Impl& s = *impl_;
  int device = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    device = s.current_device();
  }
  // An all-reduce of one byte; on the NCCL stream it runs after every
  // earlier collective of this device, and wait() blocks the host.
  const Tensor t = zeros({1}, TensorOptions(kUInt8).device(Device(kCUDA, device)));
  const std::string what = "barrier on rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  return s.launch(what, device, {t}, true,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    LOOM_NCCL(ncclAllReduce(t.data_ptr(), t.data_ptr(), 1, ncclUint8, ncclMax,
                                            comm, stream));
                  });
}

WorkPtr ProcessGroupNccl::send(const Tensor& tensor, int dst, int tag) {
  check_cuda_tensor("send", tensor, "tensor");
  checks::check_peer(kWho, "send", "dst", dst, rank_, size_, tag);
  Impl& s = *impl_;
  const std::string what = "send of " + std::to_string(tensor.numel()) + " " +
                           dtype_name(tensor.dtype()) + " to rank " + std::to_string(dst) +
                           " with tag " + std::to_string(tag) + " on rank " +
                           std::to_string(rank_) + " of " + std::to_string(size_);
  const Tensor t = tensor;
  return s.launch(what, t.device().index, {t}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (t.numel() == 0) return;
                    LOOM_NCCL(ncclSend(t.data_ptr(), t.numel(), nccl_type(t.dtype()), dst, comm,
                                       stream));
                  });
}

WorkPtr ProcessGroupNccl::recv(Tensor& tensor, int src, int tag) {
  check_cuda_tensor("recv", tensor, "tensor");
  checks::check_peer(kWho, "recv", "src", src, rank_, size_, tag);
  Impl& s = *impl_;
  const std::string what = "recv of " + std::to_string(tensor.numel()) + " " +
                           dtype_name(tensor.dtype()) + " from rank " + std::to_string(src) +
                           " with tag " + std::to_string(tag) + " on rank " +
                           std::to_string(rank_) + " of " + std::to_string(size_);
  const Tensor t = tensor;
  return s.launch(what, t.device().index, {t}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (t.numel() == 0) return;
                    LOOM_NCCL(ncclRecv(t.data_ptr(), t.numel(), nccl_type(t.dtype()), src, comm,
                                       stream));
                  });
}

#undef LOOM_NCCL

#endif  // LOOM_WITH_CUDA

}  // namespace distributed
}  // namespace loom
