// What a queued NCCL item does on its stream, for loom's CUDA emulator: it
// posts its sends, meets the other ranks at each of its collectives (their
// calls matched, this rank's result computed, reductions in rank order),
// takes its receives from the mailboxes and waits until its sends have been
// received (NcclState.h describes the whole protocol).  Also the data types,
// reduction operations and operation kinds the checks use.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "HostMath.h"
#include "NcclState.h"

namespace loom_emu {
namespace nccl {

// ---- data types and operations ---------------------------------------------------------------

bool valid_type(ncclDataType_t t) { return t >= ncclInt8 && t < ncclNumTypes; }

bool valid_op(ncclRedOp_t op) { return op >= ncclSum && op < ncclNumOps; }

namespace {

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

// ---- kinds of operation ------------------------------------------------------------------------

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

}  // namespace

bool reduces(Kind k) {
  return k == Kind::kAllReduce || k == Kind::kReduce || k == Kind::kReduceScatter;
}

bool rooted(Kind k) {
  return k == Kind::kBroadcast || k == Kind::kReduce || k == Kind::kGather || k == Kind::kScatter;
}

namespace {

std::string describe(const Op& op) {
  std::string s = std::string(kind_name(op.kind)) + " of " + std::to_string(op.count) + " " +
                  type_name(op.type);
  if (reduces(op.kind)) s += std::string(" (") + op_name(op.op) + ")";
  if (rooted(op.kind)) s += " with root " + std::to_string(op.root);
  if (op.kind == Kind::kSend) s += " to rank " + std::to_string(op.root);
  if (op.kind == Kind::kRecv) s += " from rank " + std::to_string(op.root);
  return s;
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

}  // namespace

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

}  // namespace nccl
}  // namespace loom_emu
