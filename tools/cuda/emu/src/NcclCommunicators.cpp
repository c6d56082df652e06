// NCCL's communicators, for loom's CUDA emulator: unique ids,
// ncclCommInitRank* and ncclCommInitAll (the ranks that pass one unique id
// meet in a Clique), finalize, destroy and abort, the communicator queries,
// and NCCL's errors (the last error, a communicator's asynchronous error).
// See NcclState.h for the rest of NCCL.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_set>

#include "NcclState.h"

namespace loom_emu {
namespace nccl {
namespace {

// The first bytes of every unique id this emulator makes.
constexpr char kIdMagic[8] = {'l', 'o', 'o', 'm', 'E', 'M', 'U', '1'};
constexpr unsigned kConfigMagic = 0xcafebeef;

}  // namespace

// ---- errors ----------------------------------------------------------------------------------

namespace {

std::mutex& error_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

std::string& last_error() {
  static auto* s = new std::string();
  return *s;
}

}  // namespace

// Records `why` as NCCL's last error and returns r.
ncclResult_t fail(ncclResult_t r, const std::string& why) {
  std::lock_guard<std::mutex> lock(error_mutex());
  last_error() = why;
  return r;
}

// ---- communicators ---------------------------------------------------------------------------

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Clique>> forming;  // cliques still missing ranks
  std::unordered_set<const ncclComm*> live;
};

Registry& registry() {
  static auto* r = new Registry();  // outlives static destructors
  return *r;
}

}  // namespace

bool is_live(const ncclComm* c) {
  if (c == nullptr) return false;
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().live.count(c) != 0;
}

// Waits until q has all its ranks (or `rank` fails).  Caller holds no lock.
ncclResult_t wait_complete(Clique& q, int rank) {
  std::unique_lock<std::mutex> lock(q.mutex);
  q.changed.wait(lock, [&] { return q.complete || q.async[rank] != ncclSuccess; });
  return q.async[rank];
}

namespace {

ncclResult_t init_rank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, int device,
                       bool blocking) {
  const char* fn = "ncclCommInitRank";
  if (out == nullptr) return fail(ncclInvalidArgument, std::string(fn) + ": comm is NULL");
  if (nranks < 1)
    return fail(ncclInvalidArgument, std::string(fn) + ": nranks " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, std::string(fn) + ": rank " + std::to_string(rank) +
                                         " is not in [0, " + std::to_string(nranks) + ")");
  if (std::memcmp(id.internal, kIdMagic, sizeof kIdMagic) != 0)
    return fail(ncclInvalidArgument,
                std::string(fn) + ": the unique id was not made by ncclGetUniqueId");
  *out = nullptr;  // until this rank has joined
  const std::string key(id.internal, NCCL_UNIQUE_ID_BYTES);
  std::shared_ptr<Clique> q;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto& slot = registry().forming[key];
    if (!slot) slot = std::make_shared<Clique>(key, nranks);
    q = slot;
    std::lock_guard<std::mutex> qlock(q->mutex);
    if (!q->refused.empty()) return fail(ncclInvalidUsage, std::string(fn) + ": " + q->refused);
    if (q->nranks != nranks)
      return fail(ncclInvalidUsage, std::string(fn) + ": rank " + std::to_string(rank) +
                                        " says the communicator has " + std::to_string(nranks) +
                                        " ranks, an earlier rank said " +
                                        std::to_string(q->nranks));
    if (q->joined[rank])
      return fail(ncclInvalidUsage,
                  std::string(fn) + ": rank " + std::to_string(rank) + " joined twice");
    for (int r = 0; r < nranks; ++r)
      if (q->joined[r] && q->device[r] == device) {
        // NCCL: "Duplicate GPU detected"; every rank's init fails.
        q->refused = "Duplicate GPU detected: rank " + std::to_string(rank) + " and rank " +
                     std::to_string(r) + " both on CUDA device " + std::to_string(device) +
                     " (NCCL cannot put two ranks of one communicator on one GPU)";
        for (int p = 0; p < nranks; ++p)
          if (q->joined[p]) q->set_error(p, ncclInvalidUsage, q->refused);
        q->changed.notify_all();
        return fail(ncclInvalidUsage, std::string(fn) + ": " + q->refused);
      }
    q->joined[rank] = true;
    q->device[rank] = device;
    ++q->joined_count;
    ++q->members;
    if (q->joined_count == nranks) {
      q->complete = true;
      registry().forming.erase(key);
    }
    auto* comm = new ncclComm();
    comm->clique = q;
    comm->rank = rank;
    comm->nranks = nranks;
    comm->device = device;
    comm->blocking = blocking;
    registry().live.insert(comm);
    *out = comm;
  }
  q->changed.notify_all();
  std::unique_lock<std::mutex> lock(q->mutex);
  if (q->complete) return ncclSuccess;
  lock.unlock();
  if (!blocking) return ncclInProgress;
  if (t_group_depth > 0) {  // a blocking init in a group completes at ncclGroupEnd
    t_group_inits.emplace_back(q, rank);
    return ncclSuccess;
  }
  const ncclResult_t r = wait_complete(*q, rank);
  return r == ncclSuccess ? r : fail(r, std::string(fn) + ": " + q->why[rank]);
}

// Takes comm out of its clique (abort: wake everything waiting on it).
void release(ncclComm_t comm, bool abort) {
  std::shared_ptr<Clique> q = comm->clique;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().live.erase(comm);
    std::lock_guard<std::mutex> qlock(q->mutex);
    if (abort) q->gone[comm->rank] = true;
    if (--q->members == 0 && !q->complete) {
      auto it = registry().forming.find(q->key);
      if (it != registry().forming.end() && it->second == q) registry().forming.erase(it);
    }
  }
  q->changed.notify_all();
  delete comm;
}

std::string make_id_tail() {
  static std::atomic<uint64_t> counter{0};
  std::random_device device;
  std::string tail;
  const uint64_t words[4] = {static_cast<uint64_t>(::getpid()), counter.fetch_add(1),
                             (static_cast<uint64_t>(device()) << 32) | device(),
                             static_cast<uint64_t>(
                                 std::chrono::steady_clock::now().time_since_epoch().count())};
  tail.assign(reinterpret_cast<const char*>(words), sizeof words);
  return tail;
}

}  // namespace
}  // namespace nccl
}  // namespace loom_emu

using loom_emu::nccl::fail;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  std::memset(uniqueId->internal, 0, sizeof uniqueId->internal);
  std::memcpy(uniqueId->internal, loom_emu::nccl::kIdMagic, sizeof loom_emu::nccl::kIdMagic);
  const std::string tail = loom_emu::nccl::make_id_tail();
  std::memcpy(uniqueId->internal + sizeof loom_emu::nccl::kIdMagic, tail.data(), tail.size());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  bool blocking = true;
  if (config != nullptr) {
    if (config->magic != loom_emu::nccl::kConfigMagic || config->size < sizeof(size_t) * 2)
      return fail(ncclInvalidArgument, "ncclCommInitRankConfig: config was not initialised with "
                                       "NCCL_CONFIG_INITIALIZER");
    if (config->blocking != NCCL_CONFIG_UNDEF_INT) blocking = config->blocking != 0;
  }
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return fail(ncclUnhandledCudaError, "ncclCommInitRankConfig: cudaGetDevice failed");
  return loom_emu::nccl::init_rank(comm, nranks, commId, rank, device, blocking);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (comm == nullptr || ndev < 1)
    return fail(ncclInvalidArgument, "ncclCommInitAll: comm is NULL or ndev < 1");
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclGroupStart();
  ncclResult_t result = ncclSuccess;
  for (int i = 0; i < ndev && result == ncclSuccess; ++i)
    result = loom_emu::nccl::init_rank(&comm[i], ndev, id, i, devlist ? devlist[i] : i, true);
  const ncclResult_t end = ncclGroupEnd();
  if (result != ncclSuccess) {
    for (int i = 0; i < ndev; ++i)
      if (comm[i] != nullptr && loom_emu::nccl::is_live(comm[i])) {
        loom_emu::nccl::release(comm[i], true);
        comm[i] = nullptr;
      }
    return result;
  }
  return end;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!loom_emu::nccl::is_live(comm))
    return fail(ncclInvalidArgument, "ncclCommFinalize: comm is not a live communicator");
  return ncclSuccess;  // queued operations finish in stream order by themselves
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!loom_emu::nccl::is_live(comm))
    return fail(ncclInvalidArgument, "ncclCommDestroy: comm is not a live communicator");
  loom_emu::nccl::release(comm, false);  // queued operations keep the clique alive
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!loom_emu::nccl::is_live(comm))
    return fail(ncclInvalidArgument, "ncclCommAbort: comm is not a live communicator");
  loom_emu::nccl::release(comm, true);
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (see ncclGetLastError)";
    case ncclSystemError: return "unhandled system error (see ncclGetLastError)";
    case ncclInternalError: return "internal error (see ncclGetLastError)";
    case ncclInvalidArgument: return "invalid argument (see ncclGetLastError)";
    case ncclInvalidUsage: return "invalid usage (see ncclGetLastError)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  thread_local std::string text;
  text.clear();
  if (comm != nullptr && loom_emu::nccl::is_live(comm)) {
    loom_emu::nccl::Clique& q = *comm->clique;
    std::lock_guard<std::mutex> lock(q.mutex);
    if (q.async[comm->rank] != ncclSuccess) text = q.why[comm->rank];
  }
  if (text.empty()) {
    std::lock_guard<std::mutex> lock(loom_emu::nccl::error_mutex());
    text = loom_emu::nccl::last_error();
  }
  return text.c_str();
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (asyncError == nullptr || !loom_emu::nccl::is_live(comm))
    return fail(ncclInvalidArgument,
                "ncclCommGetAsyncError: asyncError is NULL or comm is not a live communicator");
  loom_emu::nccl::Clique& q = *comm->clique;
  std::lock_guard<std::mutex> lock(q.mutex);
  if (q.async[comm->rank] != ncclSuccess)
    *asyncError = q.async[comm->rank];
  else
    *asyncError = q.complete ? ncclSuccess : ncclInProgress;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (count == nullptr || !loom_emu::nccl::is_live(comm))
    return fail(ncclInvalidArgument, "ncclCommCount: a NULL pointer or not a live communicator");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (device == nullptr || !loom_emu::nccl::is_live(comm))
    return fail(ncclInvalidArgument,
                "ncclCommCuDevice: a NULL pointer or not a live communicator");
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (rank == nullptr || !loom_emu::nccl::is_live(comm))
    return fail(ncclInvalidArgument,
                "ncclCommUserRank: a NULL pointer or not a live communicator");
  *rank = comm->rank;
  return ncclSuccess;
}

}  // extern "C"
