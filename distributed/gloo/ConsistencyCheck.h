// ProcessGroupGloo's consistency check: what one rank says about the
// collective it is about to run (a Signature), and the comparison of every
// rank's.  Private to the gloo group (distributed/gloo/Worker.cpp runs the
// exchange).
//
// Design note (consistency check).  Gloo aborts the process (std::terminate
// in its IO thread) when ranks pass different sizes.  So before each
// collective the ranks exchange a few bytes describing it (kind, op, dtype,
// counts, root) and all fail with one clear loom::Error when they disagree;
// the group stays usable.  It costs one small message round per collective;
// turn it off with check_consistency = false only when the program is known
// to be uniform.  Every rank's record is its encoded Signature followed by a
// payload area of a fixed size (see "Small messages" in Worker.cpp), so
// records always have equal size and a mismatch stays an error, never an
// abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace gloo_glue {

enum class Kind : int64_t {
  AllReduce = 1,
  Broadcast,
  Reduce,
  AllGather,
  AllGatherIntoTensor,
  Gather,
  Scatter,
  ReduceScatter,
  AllToAll,
  Barrier,
};

// "all_reduce", ...
const char* kind_name(Kind kind);

// The first word of every consistency-check record and point-to-point
// header: "loomgloo".
constexpr int64_t kMagic = 0x6c6f6f6d676c6f6fLL;
// Bytes of data every consistency-check record carries (see "Small messages"
// in Worker.cpp): enough for a typical metric, loss or BatchNorm buffer set,
// small enough that the check of a large collective pays nothing noticeable
// for it.
constexpr size_t kRecordPayload = 4096;
// How many dtypes loom has: a dtype read off the wire must be below this.
constexpr int kNumDTypes = 6;

// What one rank says about the collective it is about to run.  Fields a
// collective does not use stay at their defaults so they compare equal.
struct Signature {
  Kind kind = Kind::Barrier;
  int64_t op = -1;
  int64_t dtype = -1;
  int64_t numel = -1;  // per-rank element count (see each collective)
  int64_t root = -1;
  std::vector<int64_t> send_counts;  // all_to_all: elements to each rank
  std::vector<int64_t> recv_counts;  // all_to_all: elements from each rank

  // The words every rank sends: kMagic, seq, the fields, then (all_to_all)
  // the counts; words(size) of them.
  static constexpr size_t kFixed = 7;
  static size_t words(int size) { return kFixed + 2 * static_cast<size_t>(size); }
  std::vector<int64_t> encode(uint64_t seq, int size) const;
  static Signature decode(const int64_t* words, int size);
};

// A disagreement between ranks found by the check.
struct Mismatch : Error {
  using Error::Error;
};

// "float32", or "dtype#9" for a number that is no dtype (read off the wire).
std::string dtype_text(int64_t dtype);
// "all_reduce (sum) of 1024 float32" (no rank).
std::string what(const Signature& s);
// "all_reduce (sum) of 1024 float32 on rank 1 of 2".
std::string describe(const Signature& s, int rank, int size);

// Compares the records every rank sent (record r at all + r * record_words,
// each starting with an encoded Signature) for this rank's collective #seq,
// described by `description`.  Throws loom::Error for a malformed record,
// Mismatch when the ranks are out of step or disagree on the collective (the
// same message on every rank: all compare against rank 0).
void compare_signatures(const int64_t* all, size_t record_words, int rank, int size,
                        uint64_t seq, const std::string& description);

}  // namespace gloo_glue
}  // namespace distributed
}  // namespace loom
