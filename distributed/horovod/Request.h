// One queued hvd operation, as the Controller sees it.  Private to
// distributed/horovod: the public entry points (distributed/horovod/Ops.h,
// DistributedOptimizer) check their arguments and build these.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/ReduceOp.h"
#include "distributed/horovod/HandleState.h"
#include "distributed/horovod/Negotiation.h"
#include "tensor/Tensor.h"

namespace loom {
namespace distributed {
namespace horovod {

struct Request {
  std::string name;
  Descriptor desc;  // what the other ranks see (desc.name_hash == hash_name(name))
  Tensor input;     // this rank's contribution (any layout; copied when packed)
  // allreduce, broadcast: receives the result (may be `input` itself).
  Tensor output;
  ReduceOp op = ReduceOp::Sum;  // allreduce
  double prescale = 1.0;        // allreduce: input * prescale is sent
  double postscale = 1.0;       // allreduce: result * postscale (then / size for Avg)
  int root = 0;                 // broadcast
  std::vector<int64_t> splits;  // alltoall: rows to each rank (sums to dim 0)
  // Optional, on the waiting thread once `output` holds the result: returns
  // what synchronize() gives the user (e.g. decompression).
  std::function<Tensor(const Tensor&)> after;
  std::shared_ptr<detail::HandleState> state;

  std::chrono::steady_clock::time_point submitted;
  bool warned = false;  // the stall warning was printed
};

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
