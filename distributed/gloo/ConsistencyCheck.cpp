#include "distributed/gloo/ConsistencyCheck.h"

#include <sstream>

#include "distributed/ReduceOp.h"
#include "tensor/DType.h"

namespace loom {
namespace distributed {
namespace gloo_glue {

namespace {

bool has_op(Kind k) {
  return k == Kind::AllReduce || k == Kind::Reduce || k == Kind::ReduceScatter;
}
bool has_root(Kind k) {
  return k == Kind::Broadcast || k == Kind::Reduce || k == Kind::Gather || k == Kind::Scatter;
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::AllReduce: return "all_reduce";
    case Kind::Broadcast: return "broadcast";
    case Kind::Reduce: return "reduce";
    case Kind::AllGather: return "all_gather";
    case Kind::AllGatherIntoTensor: return "all_gather_into_tensor";
    case Kind::Gather: return "gather";
    case Kind::Scatter: return "scatter";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::AllToAll: return "all_to_all";
    case Kind::Barrier: return "barrier";
  }
  return "unknown collective";
}

std::vector<int64_t> Signature::encode(uint64_t seq, int size) const {
  std::vector<int64_t> v(words(size), -1);
  v[0] = kMagic;
  v[1] = static_cast<int64_t>(seq);
  v[2] = static_cast<int64_t>(kind);
  v[3] = op;
  v[4] = dtype;
  v[5] = numel;
  v[6] = root;
  for (size_t i = 0; i < send_counts.size(); ++i) v[kFixed + i] = send_counts[i];
  for (size_t i = 0; i < recv_counts.size(); ++i) v[kFixed + size + i] = recv_counts[i];
  return v;
}

Signature Signature::decode(const int64_t* v, int size) {
  Signature s;
  s.kind = static_cast<Kind>(v[2]);
  s.op = v[3];
  s.dtype = v[4];
  s.numel = v[5];
  s.root = v[6];
  if (s.kind == Kind::AllToAll) {
    s.send_counts.assign(v + kFixed, v + kFixed + size);
    s.recv_counts.assign(v + kFixed + size, v + kFixed + 2 * size);
  }
  return s;
}

std::string dtype_text(int64_t dtype) {
  if (dtype < 0 || dtype >= kNumDTypes) return "dtype#" + std::to_string(dtype);
  return dtype_name(static_cast<DType>(dtype));
}

std::string what(const Signature& s) {
  std::ostringstream out;
  out << kind_name(s.kind);
  if (has_op(s.kind) && s.op >= 0) out << " (" << to_string(static_cast<ReduceOp>(s.op)) << ")";
  if (s.kind == Kind::AllToAll) {
    int64_t total = 0;
    for (int64_t c : s.send_counts) total += c;
    out << " of " << total << " " << dtype_text(s.dtype) << " sent";
  } else if (s.kind != Kind::Barrier) {
    out << " of " << s.numel << " " << dtype_text(s.dtype);
  }
  if (has_root(s.kind)) out << " with root " << s.root;
  return out.str();
}

std::string describe(const Signature& s, int rank, int size) {
  return what(s) + " on rank " + std::to_string(rank) + " of " + std::to_string(size);
}

void compare_signatures(const int64_t* all, size_t record_words, int rank, int size,
                        uint64_t seq, const std::string& description) {
  const int64_t mine = static_cast<int64_t>(seq);
  std::vector<Signature> sigs;
  for (int r = 0; r < size; ++r) {
    const int64_t* v = all + r * record_words;
    LOOM_CHECK(v[0] == kMagic, "ProcessGroupGloo: ", description, ": rank ", r,
               " sent a malformed collective description (is it running loom?)");
    if (v[1] != mine) {
      throw Mismatch("ProcessGroupGloo: ranks are out of step: rank " + std::to_string(r) +
                     " is at collective #" + std::to_string(v[1]) + " while rank " +
                     std::to_string(rank) + " is at #" + std::to_string(mine) + " (" +
                     description +
                     "); every rank must issue the same collectives in the same order");
    }
    sigs.push_back(Signature::decode(v, size));
  }
  const Signature& ref = sigs[0];
  for (int r = 1; r < size; ++r) {
    const Signature& s = sigs[r];
    if (s.kind != ref.kind || s.op != ref.op || s.dtype != ref.dtype || s.numel != ref.numel ||
        s.root != ref.root) {
      throw Mismatch("ProcessGroupGloo: ranks disagree on collective #" + std::to_string(seq) +
                     ": rank 0 issued " + what(ref) + ", rank " + std::to_string(r) +
                     " issued " + what(s) +
                     " (every rank must issue the same collectives, with matching dtypes and "
                     "sizes, in the same order)");
    }
  }
  if (ref.kind == Kind::AllToAll) {
    for (int i = 0; i < size; ++i)
      for (int j = 0; j < size; ++j)
        if (sigs[i].send_counts[j] != sigs[j].recv_counts[i])
          throw Mismatch("ProcessGroupGloo: all_to_all #" + std::to_string(seq) + ": rank " +
                         std::to_string(i) + " sends " + std::to_string(sigs[i].send_counts[j]) +
                         " elements to rank " + std::to_string(j) + " (inputs[" +
                         std::to_string(j) + "]), but rank " + std::to_string(j) + " expects " +
                         std::to_string(sigs[j].recv_counts[i]) + " (outputs[" +
                         std::to_string(i) + "])");
  }
}

}  // namespace gloo_glue
}  // namespace distributed
}  // namespace loom
