// Running one planned group of a negotiation round (distributed/horovod/
// Negotiation.h): packing the tensors into a fusion buffer, issuing the
// collective on loom's process groups, and giving each request's handle the
// closure that unpacks its result.  Private to distributed/horovod; called
// only from the Controller's background thread, so every rank issues the
// same collectives in the same order.
//
//   allreduce   fused: one flat buffer (total elements) per group; Avg is a
//               sum, then * postscale / size() when unpacked (size() counts
//               joined ranks, which send zeros: the zero-padded average).
//   broadcast   fused: root packs, everyone unpacks.
//   allgather   the ranks' row counts are all-gathered first (on the CPU
//               group), then every rank sends max(rows) rows (zero padded);
//               the output keeps each rank's real rows, in rank order.
//   alltoall    the split matrix is all-gathered first, then one
//               all_to_all with per-peer sizes.
// A joined rank (request == nullptr) sends neutral data and drops what it
// receives.
#pragma once

#include <vector>

#include "distributed/ProcessGroup.h"
#include "distributed/horovod/Negotiation.h"
#include "distributed/horovod/Request.h"

namespace loom {
namespace distributed {
namespace horovod {

struct ExecContext {
  ProcessGroupPtr cpu_group;   // negotiation, count exchanges, CPU payloads
  ProcessGroupPtr cuda_group;  // CUDA payloads; null: cpu_group stages them through the host
  int rank = 0;
  int size = 1;

  const ProcessGroupPtr& group_for(DeviceType type) const {
    return type == kCUDA && cuda_group ? cuda_group : cpu_group;
  }
};

// Issues the collective(s) of one group.  descs[i] is entry i's descriptor,
// requests[i] this rank's request for it (all null on a joined rank).  Every
// request's state is issued, or failed when packing its tensor fails here
// (this rank then sends neutral data for it, so the ranks stay in step).
// Throws when a collective cannot be issued; as the descriptors agree on
// every rank, every rank throws alike, and the Controller fails the group's
// handles.
void execute_group(const ExecContext& ctx, const std::vector<Descriptor>& descs,
                   const std::vector<Request*>& requests);

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
