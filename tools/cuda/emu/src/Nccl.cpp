// NCCL on the host, for loom's CUDA emulator: communicators whose ranks live
// in this process (see include/nccl.h for what is and is not emulated).
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
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "HostMath.h"
#include "loom_emu/Stream.h"

namespace loom_emu {
namespace nccl {
namespace {

// The first bytes of every unique id this emulator makes.
constexpr char kIdMagic[8] = {'l', 'o', 'o', 'm', 'E', 'M', 'U', '1'};
constexpr unsigned kConfigMagic = 0xcafebeef;

// ---- errors ----------------------------------------------------------------------------------

std::mutex& error_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

std::string& last_error() {
  static auto* s = new std::string();
  return *s;
}

// Records `why` as NCCL's last error and returns r.
ncclResult_t fail(ncclResult_t r, const std::string& why) {
  std::lock_guard<std::mutex> lock(error_mutex());
  last_error() = why;
  return r;
}

// ---- data types and operations ---------------------------------------------------------------

bool valid_type(ncclDataType_t t) { return t >= ncclInt8 && t < ncclNumTypes; }

bool valid_op(ncclRedOp_t op) { return op >= ncclSum && op < ncclNumOps; }

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 1;
  }
}

const char* type_name(ncclDataType_t t) {
  static const char* names[] = {"int8",    "uint8",   "int32",    "uint32",
                                "int64",   "uint64",  "float16",  "float32",
                                "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  return valid_type(t) ? names[t] : "an unknown type";
}

const char* op_name(ncclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return valid_op(op) ? names[op] : "an unknown op";
}

// Integers: sums and products wrap (computed unsigned), avg truncates.
template <typename T>
void reduce_int(int n, ncclRedOp_t op, const std::vector<const void*>& in, size_t offset,
                size_t count, void* out) {
  using U = std::make_unsigned_t<T>;
  for (size_t i = 0; i < count; ++i) {
    T acc = static_cast<const T*>(in[0])[offset + i];
    for (int r = 1; r < n; ++r) {
      const T x = static_cast<const T*>(in[r])[offset + i];
      switch (op) {
        case ncclSum:
        case ncclAvg: acc = static_cast<T>(static_cast<U>(acc) + static_cast<U>(x)); break;
        case ncclProd: acc = static_cast<T>(static_cast<U>(acc) * static_cast<U>(x)); break;
        case ncclMax: acc = std::max(acc, x); break;
        case ncclMin: acc = std::min(acc, x); break;
        default: break;
      }
    }
    if (op == ncclAvg) acc = static_cast<T>(acc / static_cast<T>(n));
    static_cast<T*>(out)[i] = acc;
  }
}

// Floating types stored as T, computed as C (float for the 16-bit types),
// every step rounded back to T.
template <typename T, typename C, C (*Load)(T), T (*Store)(C)>
void reduce_float(int n, ncclRedOp_t op, const std::vector<const void*>& in, size_t offset,
                  size_t count, void* out) {
  const C inv = Load(Store(C(1) / static_cast<C>(n)));
  const auto value = [&](int r, size_t i) {
    const C x = Load(static_cast<const T*>(in[r])[offset + i]);
    return op == ncclAvg ? Load(Store(x * inv)) : x;
  };
  for (size_t i = 0; i < count; ++i) {
    C acc = value(0, i);
    for (int r = 1; r < n; ++r) {
      const C x = value(r, i);
      switch (op) {
        case ncclSum:
        case ncclAvg: acc = acc + x; break;
        case ncclProd: acc = acc * x; break;
        case ncclMax: acc = x > acc ? x : acc; break;
        case ncclMin: acc = x < acc ? x : acc; break;
        default: break;
      }
      acc = Load(Store(acc));
    }
    static_cast<T*>(out)[i] = Store(acc);
  }
}

template <typename T>
T same(T v) {
  return v;
}

// out[i] = in[0][offset + i] op ... op in[n - 1][offset + i], i < count.
void reduce(ncclDataType_t t, ncclRedOp_t op, int n, const std::vector<const void*>& in,
            size_t offset, size_t count, void* out) {
  switch (t) {
    case ncclInt8: return reduce_int<int8_t>(n, op, in, offset, count, out);
    case ncclUint8: return reduce_int<uint8_t>(n, op, in, offset, count, out);
    case ncclInt32: return reduce_int<int32_t>(n, op, in, offset, count, out);
    case ncclUint32: return reduce_int<uint32_t>(n, op, in, offset, count, out);
    case ncclInt64: return reduce_int<int64_t>(n, op, in, offset, count, out);
    case ncclUint64: return reduce_int<uint64_t>(n, op, in, offset, count, out);
    case ncclFloat32:
      return reduce_float<float, float, same<float>, same<float>>(n, op, in, offset, count, out);
    case ncclFloat64:
      return reduce_float<double, double, same<double>, same<double>>(n, op, in, offset, count,
                                                                      out);
    case ncclFloat16:
      return reduce_float<uint16_t, float, libs::half_to_float, libs::float_to_half>(
          n, op, in, offset, count, out);
    case ncclBfloat16:
      return reduce_float<uint16_t, float, libs::bf16_to_float, libs::float_to_bf16>(
          n, op, in, offset, count, out);
    default: return;  // fp8: refused when the call is made
  }
}

// ---- cliques -----------------------------------------------------------------------------------

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

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kAllReduce: return "ncclAllReduce";
    case Kind::kBroadcast: return "ncclBroadcast";
    case Kind::kReduce: return "ncclReduce";
    case Kind::kAllGather: return "ncclAllGather";
    case Kind::kReduceScatter: return "ncclReduceScatter";
    case Kind::kAlltoAll: return "ncclAlltoAll";
    case Kind::kGather: return "ncclGather";
    case Kind::kScatter: return "ncclScatter";
    case Kind::kSend: return "ncclSend";
    case Kind::kRecv: return "ncclRecv";
  }
  return "?";
}

bool reduces(Kind k) {
  return k == Kind::kAllReduce || k == Kind::kReduce || k == Kind::kReduceScatter;
}

bool rooted(Kind k) {
  return k == Kind::kBroadcast || k == Kind::kReduce || k == Kind::kGather || k == Kind::kScatter;
}

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

std::string describe(const Op& op) {
  std::string s = std::string(kind_name(op.kind)) + " of " + std::to_string(op.count) + " " +
                  type_name(op.type);
  if (reduces(op.kind)) s += std::string(" (") + op_name(op.op) + ")";
  if (rooted(op.kind)) s += " with root " + std::to_string(op.root);
  if (op.kind == Kind::kSend) s += " to rank " + std::to_string(op.root);
  if (op.kind == Kind::kRecv) s += " from rank " + std::to_string(op.root);
  return s;
}

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

}  // namespace
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

bool is_live(const ncclComm* c) {
  if (c == nullptr) return false;
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().live.count(c) != 0;
}

// ---- running operations on a stream ------------------------------------------------------------

// This rank's result of a collective whose ranks' calls are `ops`; false when
// this rank writes nothing (a non-root of Reduce or Gather).
bool compute(int n, int me, const std::vector<Op>& ops, std::vector<unsigned char>* out) {
  const Op& mine = ops[me];
  const size_t es = type_size(mine.type), c = mine.count, bytes = c * es;
  std::vector<const void*> in(n);
  for (int r = 0; r < n; ++r) in[r] = ops[r].send;
  switch (mine.kind) {
    case Kind::kAllReduce:
      out->resize(bytes);
      reduce(mine.type, mine.op, n, in, 0, c, out->data());
      return true;
    case Kind::kReduce:
      if (me != mine.root) return false;
      out->resize(bytes);
      reduce(mine.type, mine.op, n, in, 0, c, out->data());
      return true;
    case Kind::kReduceScatter:
      out->resize(bytes);
      reduce(mine.type, mine.op, n, in, me * c, c, out->data());
      return true;
    case Kind::kBroadcast:
      out->resize(bytes);
      std::memcpy(out->data(), in[mine.root], bytes);
      return true;
    case Kind::kScatter:
      out->resize(bytes);
      std::memcpy(out->data(), static_cast<const unsigned char*>(in[mine.root]) + me * bytes,
                  bytes);
      return true;
    case Kind::kGather:
      if (me != mine.root) return false;
      [[fallthrough]];
    case Kind::kAllGather:
      out->resize(n * bytes);
      for (int r = 0; r < n; ++r) std::memcpy(out->data() + r * bytes, in[r], bytes);
      return true;
    case Kind::kAlltoAll:
      out->resize(n * bytes);
      for (int r = 0; r < n; ++r)
        std::memcpy(out->data() + r * bytes,
                    static_cast<const unsigned char*>(in[r]) + me * bytes, bytes);
      return true;
    default: return false;
  }
}

// Why the ranks' calls of one collective do not match ("" if they do).
std::string mismatch(const Clique& q, const Slot& slot) {
  const Op& a = slot.ops[0];
  for (int r = 1; r < q.nranks; ++r) {
    const Op& b = slot.ops[r];
    const bool same = a.kind == b.kind && a.count == b.count && a.type == b.type &&
                      (!reduces(a.kind) || a.op == b.op) && (!rooted(a.kind) || a.root == b.root);
    if (!same)
      return "mismatched collectives: rank 0 called " + describe(a) + " while rank " +
             std::to_string(r) + " called " + describe(b);
  }
  return "";
}

// Leaves a slot all ranks reached; the last to leave frees it.  Caller holds mutex.
void leave(Clique& q, uint64_t seq) {
  Slot& slot = q.slots[seq];
  if (++slot.left == q.nranks) q.slots.erase(seq);
}

bool collective(Clique& q, int me, const Op& op) {
  std::unique_lock<std::mutex> lock(q.mutex);
  if (q.gone[me]) return false;
  const uint64_t seq = q.executed[me]++;
  Slot& slot = q.slots[seq];  // std::map: the reference stays valid
  if (slot.ops.empty()) slot.ops.resize(q.nranks);
  slot.ops[me] = op;
  ++slot.arrived;
  q.changed.notify_all();
  q.changed.wait(lock, [&] { return slot.arrived == q.nranks || q.first_gone() >= 0; });
  if (slot.arrived != q.nranks) {
    if (!q.gone[me])
      q.set_error(me, ncclRemoteError,
                  describe(op) + " on rank " + std::to_string(me) + " cannot finish: rank " +
                      std::to_string(q.first_gone()) + " aborted its communicator");
    return false;
  }
  const std::string bad = mismatch(q, slot);
  if (!bad.empty()) {
    q.set_error(me, ncclInvalidUsage, bad);
    leave(q, seq);
    return false;
  }
  lock.unlock();
  std::vector<unsigned char> result;
  const bool writes = compute(q.nranks, me, slot.ops, &result);
  lock.lock();
  ++slot.finished;
  q.changed.notify_all();
  q.changed.wait(lock, [&] { return slot.finished == q.nranks || q.first_gone() >= 0; });
  if (slot.finished != q.nranks) {
    if (!q.gone[me])
      q.set_error(me, ncclRemoteError,
                  describe(op) + " on rank " + std::to_string(me) + " cannot finish: rank " +
                      std::to_string(q.first_gone()) + " aborted its communicator");
    return false;
  }
  lock.unlock();
  if (writes && !result.empty()) std::memcpy(op.recv, result.data(), result.size());
  lock.lock();
  leave(q, seq);
  return true;
}

bool receive(Clique& q, int me, const Op& op) {
  std::unique_lock<std::mutex> lock(q.mutex);
  auto& box = q.mail[{op.root, me}];
  q.changed.wait(lock, [&] { return !box.empty() || q.gone[op.root] || q.gone[me]; });
  if (box.empty()) {
    if (!q.gone[me])
      q.set_error(me, ncclRemoteError,
                  describe(op) + " on rank " + std::to_string(me) + " cannot finish: rank " +
                      std::to_string(op.root) + " aborted its communicator");
    return false;
  }
  std::shared_ptr<Message> m = box.front();
  box.pop_front();
  const size_t bytes = op.count * type_size(op.type);
  if (m->bytes != bytes) {
    const std::string why = "mismatched send/receive: rank " + std::to_string(op.root) +
                            " sent " + std::to_string(m->bytes) + " bytes, rank " +
                            std::to_string(me) + " expected " + std::to_string(bytes) + " (" +
                            describe(op) + ")";
    q.set_error(me, ncclInvalidUsage, why);
    q.set_error(op.root, ncclInvalidUsage, why);
    m->consumed = true;
    q.changed.notify_all();
    return false;
  }
  lock.unlock();
  std::memcpy(op.recv, m->data, bytes);
  lock.lock();
  m->consumed = true;
  q.changed.notify_all();
  return true;
}

// Runs one queued item: a rank's operations of one group (or one call).
void execute(Clique& q, int me, const std::vector<Op>& ops) {
  std::vector<std::shared_ptr<Message>> posted;
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    if (q.gone[me]) return;
    for (const Op& op : ops) {
      if (op.kind != Kind::kSend) continue;
      auto m = std::make_shared<Message>();
      m->data = op.send;
      m->bytes = op.count * type_size(op.type);
      m->to = op.root;
      q.mail[{me, op.root}].push_back(m);
      posted.push_back(m);
    }
  }
  q.changed.notify_all();
  for (const Op& op : ops)
    if (op.kind != Kind::kSend && op.kind != Kind::kRecv && !collective(q, me, op)) return;
  for (const Op& op : ops)
    if (op.kind == Kind::kRecv && !receive(q, me, op)) return;
  std::unique_lock<std::mutex> lock(q.mutex);
  const auto settled = [&] {
    if (q.gone[me]) return true;
    for (const auto& m : posted)
      if (!m->consumed && !q.gone[m->to]) return false;
    return true;
  };
  q.changed.wait(lock, settled);
  for (const auto& m : posted)
    if (!m->consumed && !q.gone[me]) {
      q.set_error(me, ncclRemoteError,
                  "ncclSend from rank " + std::to_string(me) + " cannot finish: rank " +
                      std::to_string(m->to) + " aborted its communicator");
      return;
    }
}

// ---- groups ------------------------------------------------------------------------------------

struct Pending {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  cudaStream_t stream = nullptr;
  Op op;
};

thread_local int t_group_depth = 0;
thread_local std::vector<Pending> t_pending;
thread_local std::vector<std::pair<std::shared_ptr<Clique>, int>> t_group_inits;
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

// ---- communicators ---------------------------------------------------------------------------

// Waits until q has all its ranks (or `rank` fails).  Caller holds no lock.
ncclResult_t wait_complete(Clique& q, int rank) {
  std::unique_lock<std::mutex> lock(q.mutex);
  q.changed.wait(lock, [&] { return q.complete || q.async[rank] != ncclSuccess; });
  return q.async[rank];
}

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
using loom_emu::nccl::Kind;
using loom_emu::nccl::make;
using loom_emu::nccl::Op;

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
