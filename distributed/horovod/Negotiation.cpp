#include "distributed/horovod/Negotiation.h"

#include <algorithm>
#include <sstream>

#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace horovod {
namespace {

// "hvd_rec1": the first word of every record.
constexpr int64_t kMagic = 0x6876645f72656331;

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

uint64_t fnv(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

// Whether two entries may share one fused collective.
bool fusable(const Descriptor& a, const Descriptor& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.device_type == b.device_type && a.arg == b.arg;
}

// Why rank r's descriptor d does not match the reference rank's ref (empty
// when it does).
std::string disagreement(const Descriptor& ref, int ref_rank, const Descriptor& d, int r) {
  const bool same = ref.kind == d.kind && ref.dtype == d.dtype && ref.count == d.count &&
                    ref.arg == d.arg && ref.device_type == d.device_type &&
                    ref.shape_hash == d.shape_hash;
  if (same) return "";
  std::ostringstream out;
  out << "rank " << ref_rank << " submitted " << ref.describe() << ", rank " << r << " submitted "
      << d.describe();
  if (ref.kind == d.kind && ref.count == d.count && ref.shape_hash != d.shape_hash)
    out << " (same number of elements, different shapes)";
  return out.str();
}

}  // namespace

std::string to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kAllreduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kAllgather: return "allgather";
    case OpKind::kAlltoall: return "alltoall";
  }
  return "unknown op";
}

uint64_t hash_name(const std::string& name) { return fnv(kFnvOffset, name.data(), name.size()); }

uint64_t hash_sizes(const IntList& sizes) {
  uint64_t h = kFnvOffset;
  const int64_t n = static_cast<int64_t>(sizes.size());
  h = fnv(h, &n, sizeof n);
  for (int64_t s : sizes) h = fnv(h, &s, sizeof s);
  return h;
}

int64_t Descriptor::nbytes() const { return count * static_cast<int64_t>(element_size(dtype)); }

std::string Descriptor::describe() const {
  std::ostringstream out;
  out << (kind == OpKind::kBroadcast ? "a " : "an ") << to_string(kind);
  if (kind == OpKind::kAllreduce) out << " (" << distributed::to_string(static_cast<ReduceOp>(arg)) << ")";
  if (kind == OpKind::kBroadcast) out << " from root " << arg;
  if (kind == OpKind::kAllreduce || kind == OpKind::kBroadcast)
    out << " of " << count << " " << dtype_name(dtype) << " elements";
  else
    out << " of " << dtype_name(dtype) << " rows of " << count << " elements";
  out << " on " << (device_type == kCUDA ? "cuda" : "cpu");
  return out.str();
}

void Record::encode(int64_t* out) const {
  LOOM_CHECK(entries.size() <= static_cast<size_t>(kMaxEntries), "hvd: a record holds at most ",
             kMaxEntries, " entries, got ", entries.size());
  std::fill(out, out + kLength, int64_t(0));
  out[0] = kMagic;
  out[1] = static_cast<int64_t>(status);
  out[2] = fusion_threshold;
  out[3] = stalled ? 1 : 0;
  out[4] = static_cast<int64_t>(entries.size());
  for (size_t k = 0; k < entries.size(); ++k) {
    const Descriptor& d = entries[k];
    int64_t* e = out + kHeaderFields + k * Descriptor::kFields;
    e[0] = static_cast<int64_t>(d.name_hash);
    e[1] = static_cast<int64_t>(d.kind);
    e[2] = static_cast<int64_t>(d.dtype);
    e[3] = d.count;
    e[4] = d.arg;
    e[5] = static_cast<int64_t>(d.device_type);
    e[6] = static_cast<int64_t>(d.shape_hash);
  }
}

Record Record::decode(const int64_t* in, int rank) {
  LOOM_CHECK(in[0] == kMagic, "hvd: rank ", rank,
             " sent a malformed negotiation record (is every rank running loom's hvd with the same "
             "version?)");
  const int64_t status = in[1];
  const int64_t n = in[4];
  LOOM_CHECK(status >= 1 && status <= 3 && n >= 0 && n <= kMaxEntries, "hvd: rank ", rank,
             " sent a malformed negotiation record (status ", status, ", ", n, " entries)");
  Record r;
  r.status = static_cast<RankStatus>(status);
  r.fusion_threshold = in[2];
  r.stalled = in[3] != 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t* e = in + kHeaderFields + k * Descriptor::kFields;
    Descriptor d;
    d.name_hash = static_cast<uint64_t>(e[0]);
    d.kind = static_cast<OpKind>(e[1]);
    d.dtype = static_cast<DType>(e[2]);
    d.count = e[3];
    d.arg = e[4];
    d.device_type = static_cast<DeviceType>(e[5]);
    d.shape_hash = static_cast<uint64_t>(e[6]);
    r.entries.push_back(d);
  }
  return r;
}

Round plan_round(const std::vector<Record>& records) {
  LOOM_CHECK(!records.empty(), "hvd: plan_round needs at least one record");
  const int size = static_cast<int>(records.size());
  Round round;
  std::vector<int> active;
  for (int r = 0; r < size; ++r) {
    round.status.push_back(records[r].status);
    if (records[r].status == RankStatus::kActive) active.push_back(r);
    round.stalled = round.stalled || records[r].stalled;
    LOOM_CHECK(records[r].fusion_threshold == records[0].fusion_threshold,
               "hvd: ranks use different fusion thresholds: rank 0 has ", records[0].fusion_threshold,
               " bytes, rank ", r, " has ", records[r].fusion_threshold,
               " (set HOROVOD_FUSION_THRESHOLD or hvd::InitOptions::fusion_threshold_bytes the same "
               "on every rank)");
  }
  if (active.empty()) {
    round.all_joined = true;
    for (int r = 0; r < size; ++r)
      if (records[r].status == RankStatus::kJoining) round.last_joined = r;
    if (round.last_joined < 0) round.last_joined = size - 1;  // cannot happen; stay defined
    return round;
  }

  // Match the lowest active rank's entries by name on every other active rank.
  const int ref = active[0];
  std::vector<std::vector<char>> used(size);
  for (int r : active) used[r].assign(records[r].entries.size(), 0);
  for (size_t k = 0; k < records[ref].entries.size(); ++k) {
    const Descriptor& want = records[ref].entries[k];
    Round::Entry entry;
    entry.desc = want;
    entry.position.assign(size, -1);
    entry.position[ref] = static_cast<int>(k);
    bool everywhere = true;
    for (size_t a = 1; a < active.size() && everywhere; ++a) {
      const int r = active[a];
      const auto& list = records[r].entries;
      int found = -1;
      for (size_t j = 0; j < list.size(); ++j) {
        if (!used[r][j] && list[j].name_hash == want.name_hash) {
          found = static_cast<int>(j);
          break;
        }
      }
      if (found < 0) everywhere = false;
      else entry.position[r] = found;
    }
    if (!everywhere) continue;
    for (int r : active) used[r][entry.position[r]] = 1;
    for (size_t a = 1; a < active.size() && entry.error.empty(); ++a) {
      const int r = active[a];
      entry.error = disagreement(want, ref, records[r].entries[entry.position[r]], r);
    }
    if (entry.error.empty() && want.kind == OpKind::kBroadcast) {
      const int64_t root = want.arg;
      if (root < 0 || root >= size) {
        entry.error = "the root rank " + std::to_string(root) + " is outside [0, " +
                      std::to_string(size) + ")";
      } else if (round.joined(static_cast<int>(root))) {
        entry.error = "its root rank " + std::to_string(root) +
                      " has already joined (called hvd::join), so it has nothing to broadcast";
      }
    }
    round.entries.push_back(std::move(entry));
  }

  // Plan the collectives: fuse compatible all-reduces and broadcasts greedily.
  const int64_t limit = records[0].fusion_threshold;
  std::vector<char> planned(round.entries.size(), 0);
  for (size_t i = 0; i < round.entries.size(); ++i) {
    if (planned[i] || !round.entries[i].error.empty()) continue;
    planned[i] = 1;
    std::vector<size_t> group{i};
    const Descriptor& first = round.entries[i].desc;
    const bool fuses = first.kind == OpKind::kAllreduce || first.kind == OpKind::kBroadcast;
    int64_t bytes = first.nbytes();
    if (fuses && limit > 0) {
      for (size_t j = i + 1; j < round.entries.size(); ++j) {
        if (planned[j] || !round.entries[j].error.empty()) continue;
        const Descriptor& d = round.entries[j].desc;
        if (!fusable(first, d) || bytes + d.nbytes() > limit) continue;
        planned[j] = 1;
        bytes += d.nbytes();
        group.push_back(j);
      }
    }
    round.groups.push_back(std::move(group));
  }
  return round;
}

std::vector<int> ranks_without(const std::vector<Record>& records, uint64_t name_hash) {
  std::vector<int> out;
  for (size_t r = 0; r < records.size(); ++r) {
    if (records[r].status != RankStatus::kActive) continue;
    bool has = false;
    for (const Descriptor& d : records[r].entries) has = has || d.name_hash == name_hash;
    if (!has) out.push_back(static_cast<int>(r));
  }
  return out;
}

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
