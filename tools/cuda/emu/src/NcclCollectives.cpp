// NCCL's collectives, send/receive and groups, for loom's CUDA emulator: the
// checks every operation makes and how it is queued on its stream -- at once,
// or inside ncclGroupStart / ncclGroupEnd at the group's end, one item per
// communicator and stream (NcclExecution.cpp runs the item).  See
// NcclState.h for the rest of NCCL.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "NcclState.h"
#include "loom_emu/Stream.h"

namespace loom_emu {
namespace nccl {

// ---- groups ------------------------------------------------------------------------------------

thread_local int t_group_depth = 0;
thread_local std::vector<std::pair<std::shared_ptr<Clique>, int>> t_group_inits;

namespace {

struct Pending {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  cudaStream_t stream = nullptr;
  Op op;
};

thread_local std::vector<Pending> t_pending;
thread_local ncclResult_t t_group_error = ncclSuccess;  // the first failed call of the group

void launch(const std::shared_ptr<Clique>& q, int rank, cudaStream_t stream,
            std::vector<Op> ops) {
  enqueue(stream, [q, rank, ops] { execute(*q, rank, ops); });
}

// Queues op (now, or at the end of the group).
ncclResult_t submit(ncclComm_t comm, cudaStream_t stream, const Op& op) {
  if (op.count == 0) return ncclSuccess;  // NCCL skips empty operations
  if (t_group_depth > 0) {
    t_pending.push_back({comm->clique, comm->rank, stream, op});
    return ncclSuccess;
  }
  launch(comm->clique, comm->rank, stream, {op});
  return ncclSuccess;
}

// The checks every operation makes.
ncclResult_t check(const char* fn, ncclComm_t comm, const Op& op) {
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(fn) + ": comm is NULL");
  if (!is_live(comm))
    return fail(ncclInvalidArgument, std::string(fn) + ": comm is not a live communicator");
  {
    Clique& q = *comm->clique;
    std::lock_guard<std::mutex> lock(q.mutex);
    const ncclResult_t async = q.async[comm->rank];
    if (async != ncclSuccess)
      return fail(async, std::string(fn) + ": the communicator has failed: " + q.why[comm->rank]);
  }
  if (!valid_type(op.type))
    return fail(ncclInvalidArgument,
                std::string(fn) + ": invalid data type " + std::to_string(op.type));
  if (reduces(op.kind)) {
    if (!valid_op(op.op))
      return fail(ncclInvalidArgument,
                  std::string(fn) + ": invalid reduction operation " + std::to_string(op.op));
    if (op.type == ncclFloat8e4m3 || op.type == ncclFloat8e5m2)
      return fail(ncclInvalidArgument,
                  std::string(fn) + ": reductions of fp8 data are not emulated");
  }
  if ((rooted(op.kind) || op.kind == Kind::kSend || op.kind == Kind::kRecv) &&
      (op.root < 0 || op.root >= comm->nranks))
    return fail(ncclInvalidArgument, std::string(fn) + ": " +
                                         (rooted(op.kind) ? "root " : "peer ") +
                                         std::to_string(op.root) + " is not a rank of " +
                                         std::to_string(comm->nranks));
  if (op.count > 0) {
    // Buffers a rank reads / writes (a non-root's receive buffer of Reduce
    // and Gather, and a non-root's send buffer of Scatter, may be NULL).
    const bool is_root = op.root == comm->rank;
    const bool needs_send = op.kind != Kind::kRecv &&
                            !(op.kind == Kind::kBroadcast && !is_root) &&
                            !(op.kind == Kind::kScatter && !is_root);
    const bool needs_recv = op.kind != Kind::kSend &&
                            !((op.kind == Kind::kReduce || op.kind == Kind::kGather) && !is_root);
    if ((needs_send && op.send == nullptr) || (needs_recv && op.recv == nullptr))
      return fail(ncclInvalidArgument, std::string(fn) + ": a buffer is NULL");
  }
  return ncclSuccess;
}

ncclResult_t run(const char* fn, ncclComm_t comm, cudaStream_t stream, const Op& op) {
  const ncclResult_t r = check(fn, comm, op);
  if (r != ncclSuccess) {
    // As in NCCL, a failed call fails its whole group: ncclGroupEnd returns
    // the error and launches none of the group's operations.
    if (t_group_depth > 0 && t_group_error == ncclSuccess) t_group_error = r;
    return r;
  }
  return submit(comm, stream, op);
}

Op make(Kind kind, const void* send, void* recv, size_t count, ncclDataType_t type,
        ncclRedOp_t op, int root) {
  Op o;
  o.kind = kind;
  o.send = send;
  o.recv = recv;
  o.count = count;
  o.type = type;
  o.op = op;
  o.root = root;
  return o;
}

}  // namespace

}  // namespace nccl
}  // namespace loom_emu

using loom_emu::nccl::fail;
using loom_emu::nccl::Kind;
using loom_emu::nccl::make;
using loom_emu::nccl::Op;

extern "C" {

// ---- collectives ----------------------------------------------------------------------------

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return loom_emu::nccl::run("ncclReduce", comm, stream,
                             make(Kind::kReduce, sendbuff, recvbuff, count, datatype, op, root));
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  return loom_emu::nccl::run("ncclBcast", comm, stream,
                             make(Kind::kBroadcast, buff, buff, count, datatype, ncclSum, root));
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return loom_emu::nccl::run(
      "ncclBroadcast", comm, stream,
      make(Kind::kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root));
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return loom_emu::nccl::run("ncclAllReduce", comm, stream,
                             make(Kind::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0));
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return loom_emu::nccl::run(
      "ncclReduceScatter", comm, stream,
      make(Kind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return loom_emu::nccl::run(
      "ncclAllGather", comm, stream,
      make(Kind::kAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0));
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return loom_emu::nccl::run(
      "ncclAlltoAll", comm, stream,
      make(Kind::kAlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, 0));
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return loom_emu::nccl::run(
      "ncclGather", comm, stream,
      make(Kind::kGather, sendbuff, recvbuff, count, datatype, ncclSum, root));
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return loom_emu::nccl::run(
      "ncclScatter", comm, stream,
      make(Kind::kScatter, sendbuff, recvbuff, count, datatype, ncclSum, root));
}

// ---- point to point and groups ---------------------------------------------------------------

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return loom_emu::nccl::run("ncclSend", comm, stream,
                             make(Kind::kSend, sendbuff, nullptr, count, datatype, ncclSum, peer));
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return loom_emu::nccl::run("ncclRecv", comm, stream,
                             make(Kind::kRecv, nullptr, recvbuff, count, datatype, ncclSum, peer));
}

ncclResult_t ncclGroupStart() {
  ++loom_emu::nccl::t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  using namespace loom_emu::nccl;
  if (t_group_depth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd: not inside ncclGroupStart");
  if (--t_group_depth > 0) return ncclSuccess;
  if (t_group_error != ncclSuccess) {
    const ncclResult_t error = t_group_error;
    t_group_error = ncclSuccess;
    t_pending.clear();
    t_group_inits.clear();
    return error;  // ncclGetLastError still says why
  }
  // One queued item per (communicator, stream), operations in call order.
  struct Batch {
    std::shared_ptr<Clique> clique;
    int rank;
    cudaStream_t stream;
    std::vector<Op> ops;
  };
  std::vector<Batch> batches;
  for (Pending& p : t_pending) {
    auto it = std::find_if(batches.begin(), batches.end(), [&](const Batch& b) {
      return b.clique == p.clique && b.rank == p.rank && b.stream == p.stream;
    });
    if (it == batches.end()) {
      batches.push_back({p.clique, p.rank, p.stream, {}});
      it = batches.end() - 1;
    }
    it->ops.push_back(p.op);
  }
  t_pending.clear();
  for (Batch& b : batches) launch(b.clique, b.rank, b.stream, std::move(b.ops));
  // Blocking inits made in the group finish here.
  std::vector<std::pair<std::shared_ptr<Clique>, int>> inits;
  inits.swap(t_group_inits);
  for (auto& [q, rank] : inits) {
    const ncclResult_t r = wait_complete(*q, rank);
    if (r != ncclSuccess) return fail(r, "ncclGroupEnd: " + q->why[rank]);
  }
  return ncclSuccess;
}

}  // extern "C"
