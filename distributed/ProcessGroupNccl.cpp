// ProcessGroupNccl: construction, the communicators' lifetime and the
// watchdog (the state is in distributed/nccl/NcclState.h, the collectives in
// distributed/nccl/Collectives.cpp).  Without CUDA (LOOM_WITH_CUDA undefined)
// only the stubs below exist: the constructor throws.
#include "distributed/ProcessGroupNccl.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tensor/CudaRuntime.h"

#ifdef LOOM_WITH_CUDA
#include "distributed/nccl/NcclState.h"
#endif

namespace loom {
namespace distributed {

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

namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0);
}


}  // namespace

// ---- ProcessGroupNccl --------------------------------------------------------------------

ProcessGroupNccl::ProcessGroupNccl(std::shared_ptr<Store> store, int rank, int size,
                                   ProcessGroupNcclOptions options)
    : ProcessGroup(rank, size, options.timeout), options_(std::move(options)) {
  checks::check_group("ProcessGroupNccl", store, rank, size, options_.timeout);
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
    // c.stream is kept (one stream per group and device, as loom's own
    // streams are never destroyed): tensors the collectives touched were
    // record_stream'ed on it and may be freed after the group, when the
    // allocator records an event on it.
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

#endif  // LOOM_WITH_CUDA

}  // namespace distributed
}  // namespace loom
