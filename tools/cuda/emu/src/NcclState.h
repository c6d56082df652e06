// NCCL on the host, for loom's CUDA emulator: communicators whose ranks live
// in this process (see include/nccl.h for what is and is not emulated).  This
// header holds what its three source files share: a rank's operation (Op),
// the Clique the ranks of one communicator share, ncclComm, and the helpers
// more than one of them calls.  Internal to tools/cuda/emu/src.
//   NcclCommunicators.cpp  unique ids, init, finalize, destroy and abort, the
//                          communicator queries, errors
//   NcclCollectives.cpp    the collectives, send/receive and groups: the
//                          checks every call makes and how it is queued
//   NcclExecution.cpp      what a queued item does on its stream: the ranks'
//                          rendezvous, the reductions, the mailboxes
//
// The ranks that pass one unique id to ncclCommInitRank* share a Clique.  A
// call checks its arguments and queues its operation through
// loom_emu::enqueue on its stream (a group's operations, per communicator
// and stream, as one item).  On the stream the item
//   1. posts its sends into the clique's mailboxes (sender, receiver),
//   2. runs its collectives in order: each waits until every rank has
//      reached its collective of the same sequence number (counted per rank
//      as they run, so a graph replay matches again), checks that the ranks
//      agree (kind, count, type, op, root), computes this rank's result from
//      the peers' buffers into a private buffer, waits until every rank has
//      done so, and only then writes it (buffers may be in place);
//   3. takes its receives from the mailboxes, copying from the sender's
//      buffer; and
//   4. waits until its own sends have been received.
// Nothing is copied through the host except those private result buffers.
// A wait ends early when a rank it needs aborts its communicator; the call
// then fails as NCCL's would, through the communicator's asynchronous error
// (ncclRemoteError) rather than a CUDA error.  Reductions combine the ranks'
// values in rank order, each step rounded to the data type (float16 and
// bfloat16 computed in float), so all ranks get the same bits; ncclAvg
// scales each value by 1/nranks before summing (floating types) or divides
// the sum (integers, truncating), as NCCL does.
#pragma once

#include <nccl.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace loom_emu {
namespace nccl {

// ---- errors (NcclCommunicators.cpp) ----------------------------------------------------------

// Records `why` as NCCL's last error and returns r.
ncclResult_t fail(ncclResult_t r, const std::string& why);

// ---- data types and operations (NcclExecution.cpp) -------------------------------------------

bool valid_type(ncclDataType_t t);

bool valid_op(ncclRedOp_t op);

enum class Kind {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSend,
  kRecv,
};

// AllReduce, Reduce and ReduceScatter.
bool reduces(Kind k);

// Broadcast, Reduce, Gather and Scatter.
bool rooted(Kind k);

// ---- cliques -----------------------------------------------------------------------------------

// One operation of one rank, by value.  `root`: the root, or for send and
// receive the peer.
struct Op {
  Kind kind = Kind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
};

struct Message {
  const void* data = nullptr;
  size_t bytes = 0;
  int to = 0;
  bool consumed = false;
};

// The ranks' calls of one collective (by sequence number), copied: a rank's
// queued item may end (its communicator aborted) while peers still look.
struct Slot {
  std::vector<Op> ops;
  int arrived = 0;
  int finished = 0;
  int left = 0;
};

struct Clique {
  Clique(std::string k, int n)
      : key(std::move(k)),
        nranks(n),
        joined(n, false),
        device(n, -1),
        gone(n, false),
        async(n, ncclSuccess),
        why(n),
        executed(n, 0) {}

  const std::string key;
  const int nranks;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<bool> joined;
  std::vector<int> device;
  int joined_count = 0;
  int members = 0;  // joined and not yet destroyed or aborted
  bool complete = false;
  std::string refused;  // why the communicator cannot be made (duplicate device, ...)
  std::vector<bool> gone;  // aborted
  std::vector<ncclResult_t> async;
  std::vector<std::string> why;
  std::vector<uint64_t> executed;  // collectives started, per rank
  std::map<uint64_t, Slot> slots;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Message>>> mail;

  // Caller holds mutex.
  int first_gone() const {
    for (int r = 0; r < nranks; ++r)
      if (gone[r]) return r;
    return -1;
  }
  void set_error(int rank, ncclResult_t r, const std::string& w) {
    if (async[rank] == ncclSuccess) {
      async[rank] = r;
      why[rank] = w;
    }
    fail(r, w);
  }
};

}  // namespace nccl
}  // namespace loom_emu

struct ncclComm {
  std::shared_ptr<loom_emu::nccl::Clique> clique;
  int rank = 0;
  int nranks = 1;
  int device = 0;
  bool blocking = true;
};

namespace loom_emu {
namespace nccl {

// ---- communicators (NcclCommunicators.cpp) ---------------------------------------------------

// Whether c is a communicator ncclCommInitRank* made and nothing has
// destroyed or aborted.
bool is_live(const ncclComm* c);

// Waits until q has all its ranks (or `rank` fails).  Caller holds no lock.
ncclResult_t wait_complete(Clique& q, int rank);

// ---- running operations on a stream (NcclExecution.cpp) --------------------------------------

// Runs one queued item: a rank's operations of one group (or one call).
void execute(Clique& q, int me, const std::vector<Op>& ops);

// ---- groups (NcclCollectives.cpp) --------------------------------------------------------------

// The calling thread's ncclGroupStart depth, and the blocking inits made in
// its group (they complete at ncclGroupEnd).
extern thread_local int t_group_depth;
extern thread_local std::vector<std::pair<std::shared_ptr<Clique>, int>> t_group_inits;

}  // namespace nccl
}  // namespace loom_emu
