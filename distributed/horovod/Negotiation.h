// Negotiation: how the ranks agree, round by round, on which tensors to
// reduce, gather or broadcast next.  Pure logic, no communication: the
// Controller (distributed/horovod/Controller.h) moves the records.
//
// Horovod matches tensors across ranks by name, not by the order they were
// submitted in: ranks may produce gradients in different orders, or some
// only later.  loom does the same in rounds.  In a round every rank
// contributes one fixed-size Record (one all-gather, ~3.6 KB per rank):
//
//   status          active | joined | joining (first round after join())
//   fusion limit    must be equal everywhere (checked)
//   stalled         this rank has a request older than the stall timeout
//   entries[<=64]   its oldest queued requests: name hash, kind, dtype,
//                   element count, op or root, device kind, shape hash
//
// From the gathered records every rank computes the same Round:
//   * all ranks joined       -> join() finishes everywhere; it returns the
//                               highest rank that was joining in this round
//                               (the last to join).
//   * otherwise the entries that every active rank submitted, in the order
//     of the lowest active rank; an entry whose ranks disagree (kind, dtype,
//     size, shape, op, root, device) gets an error instead, the same on
//     every rank, and no collective;
//   * a broadcast from a root that has joined is an error;
//   * the valid entries are planned into groups, one collective each:
//     all-reduces with the same dtype, device kind and op, and broadcasts
//     with the same dtype, device kind and root, are fused (greedily, in
//     entry order) while the group's bytes stay within the fusion limit (0:
//     no fusion); all-gathers and all-to-alls run one by one.
// Entries not submitted by every active rank stay queued for a later round,
// unless some rank reported `stalled`: then every rank fails all its
// unmatched entries (so all ranks give up in the same round and none waits
// for a header the others will never send).
// Joined ranks take part in every group with neutral data (zeros for sum and
// average, the identity of min, max and product; no rows for all-gather and
// all-to-all), which is Horovod's join.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/ReduceOp.h"
#include "tensor/Tensor.h"

namespace loom {
namespace distributed {
namespace horovod {

enum class OpKind : int64_t { kAllreduce = 1, kBroadcast = 2, kAllgather = 3, kAlltoall = 4 };

// "allreduce", "broadcast", "allgather", "alltoall".
std::string to_string(OpKind kind);

enum class RankStatus : int64_t { kActive = 1, kJoined = 2, kJoining = 3 };

// 64-bit FNV-1a hashes (names and shapes travel as hashes).
uint64_t hash_name(const std::string& name);
uint64_t hash_sizes(const IntList& sizes);

// What one rank submitted, as the others see it.
struct Descriptor {
  uint64_t name_hash = 0;
  OpKind kind = OpKind::kAllreduce;
  DType dtype = kFloat32;
  // allreduce, broadcast: elements; allgather, alltoall: elements per row
  // (dim 0 may differ between ranks).
  int64_t count = 0;
  // allreduce: the ReduceOp; broadcast: the root rank; else 0.
  int64_t arg = 0;
  DeviceType device_type = kCPU;
  // allreduce, broadcast: of the sizes; allgather, alltoall: of sizes[1:].
  uint64_t shape_hash = 0;

  static constexpr int kFields = 7;
  // Bytes the entry adds to a fused buffer.
  int64_t nbytes() const;
  // "an allreduce (avg) of 12 float32 elements on cpu".
  std::string describe() const;
};

struct Record {
  RankStatus status = RankStatus::kActive;
  int64_t fusion_threshold = 0;
  bool stalled = false;
  std::vector<Descriptor> entries;  // at most kMaxEntries

  static constexpr int kMaxEntries = 64;
  static constexpr int kHeaderFields = 5;
  // int64 words of an encoded record.
  static constexpr int64_t kLength = kHeaderFields + int64_t(kMaxEntries) * Descriptor::kFields;

  // Writes kLength words.  Throws when there are more than kMaxEntries.
  void encode(int64_t* out) const;
  // Reads kLength words; throws loom::Error naming `rank` when they are not
  // a record (another program on the other end, or memory corruption).
  static Record decode(const int64_t* in, int rank);
};

struct Round {
  // Every rank had joined: join() returns last_joined everywhere.
  bool all_joined = false;
  int last_joined = -1;
  std::vector<RankStatus> status;  // per rank
  bool stalled = false;            // some rank reported a stall

  struct Entry {
    Descriptor desc;                 // as the lowest active rank submitted it
    std::vector<int> position;       // per rank: index in its record, -1 when joined
    std::string error;               // non-empty: ranks disagree (no collective)
  };
  std::vector<Entry> entries;        // matched, in the lowest active rank's order
  // The collectives to run, in order: indices into entries (valid ones only).
  std::vector<std::vector<size_t>> groups;

  bool joined(int rank) const { return status[rank] != RankStatus::kActive; }
};

// Plans one round from every rank's record (records[r] is rank r's).
// Throws loom::Error when the ranks use different fusion limits.
Round plan_round(const std::vector<Record>& records);

// The active ranks whose record has no entry named `name_hash` (for
// messages about tensors only some ranks submitted).
std::vector<int> ranks_without(const std::vector<Record>& records, uint64_t name_hash);

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
