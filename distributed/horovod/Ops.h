// hvd's tensor operations (Horovod's hvd.allreduce, allgather, broadcast,
// alltoall, join), each blocking or asynchronous with a Handle.
//
//   Tensor avg = hvd::allreduce(loss.detach(), "loss");          // average over ranks
//   hvd::Handle h = hvd::allreduce_async_(grad, "g", hvd::Sum);  // in place, in the background
//   Tensor all = hvd::allgather(predictions);                    // rows of every rank, rank order
//   hvd::broadcast_(weights, /*root_rank=*/0);
//   auto [out, received] = hvd::alltoall(rows, {1, 3});          // rank r gets my rows for r
//   hvd::synchronize(h);
//
// Names.  Operations are matched across ranks by name, as in Horovod: every
// rank must submit an operation of the same name (the order may differ), with
// the same kind, dtype, shape (all-reduce, broadcast; the row shape for
// all-gather and all-to-all, whose dim 0 may differ), op and root.  An empty
// name becomes "<kind>.noname.<n>", n counting this process's unnamed
// operations, so unnamed operations must be submitted in the same order on
// every rank.  Ranks that disagree get a loom::Error from synchronize() (on
// every rank), never a wrong result or a hang.  Names of operations still
// waiting to be negotiated must be unique.
//
// Results.  The in-place forms (trailing underscore) write into their
// argument; the others return a new tensor on the input's device.  Results
// record no autograd history.  Average divides the sum by size(), joined
// ranks included (they contribute zeros).  The input must not be modified
// until the operation is synchronized.
//
// Errors: every function checks its arguments at once (loom::Error naming
// the argument), and throws before hvd::init().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/ReduceOp.h"
#include "distributed/horovod/Compression.h"
#include "distributed/horovod/Handle.h"
#include "tensor/Tensor.h"

namespace loom {
namespace distributed {
namespace horovod {

// Horovod's reduction ops.  Average needs a floating dtype.
constexpr ReduceOp Average = ReduceOp::Avg;
constexpr ReduceOp Sum = ReduceOp::Sum;
constexpr ReduceOp Min = ReduceOp::Min;
constexpr ReduceOp Max = ReduceOp::Max;
constexpr ReduceOp Product = ReduceOp::Product;

// Reduces `tensor` over all ranks: op(tensor of every rank) * prescale and
// postscale factors (input * prescale_factor is sent; the result is
// multiplied by postscale_factor, and divided by size() for Average).
// compression: what travels (distributed/horovod/Compression.h).
Handle allreduce_async(const Tensor& tensor, const std::string& name = "", ReduceOp op = Average,
                       const CompressorPtr& compression = Compression::none, double prescale_factor = 1.0,
                       double postscale_factor = 1.0);
Handle allreduce_async_(Tensor& tensor, const std::string& name = "", ReduceOp op = Average,
                        const CompressorPtr& compression = Compression::none, double prescale_factor = 1.0,
                        double postscale_factor = 1.0);
Tensor allreduce(const Tensor& tensor, const std::string& name = "", ReduceOp op = Average,
                 const CompressorPtr& compression = Compression::none, double prescale_factor = 1.0,
                 double postscale_factor = 1.0);
Tensor& allreduce_(Tensor& tensor, const std::string& name = "", ReduceOp op = Average,
                   const CompressorPtr& compression = Compression::none, double prescale_factor = 1.0,
                   double postscale_factor = 1.0);

// Concatenates every rank's tensor along dim 0, in rank order.  Shapes may
// differ in dim 0 only; tensor needs at least one dimension.  A rank that
// has joined contributes no rows.
Handle allgather_async(const Tensor& tensor, const std::string& name = "");
Tensor allgather(const Tensor& tensor, const std::string& name = "");

// Every rank receives root_rank's tensor (same shape and dtype everywhere).
// The root must not have joined.
Handle broadcast_async(const Tensor& tensor, int root_rank, const std::string& name = "");
Handle broadcast_async_(Tensor& tensor, int root_rank, const std::string& name = "");
Tensor broadcast(const Tensor& tensor, int root_rank, const std::string& name = "");
Tensor& broadcast_(Tensor& tensor, int root_rank, const std::string& name = "");

// Sends splits[r] consecutive rows (dim 0) of tensor to rank r, and returns
// the rows received from every rank, concatenated in rank order.  Empty
// splits: dim 0 split evenly (it must be divisible by size()).  Otherwise
// splits has size() non-negative entries summing to dim 0.
struct AlltoallResult {
  Tensor output;
  std::vector<int64_t> received_splits;  // rows from each rank
};
Handle alltoall_async(const Tensor& tensor, const std::vector<int64_t>& splits = {},
                      const std::string& name = "");
AlltoallResult alltoall(const Tensor& tensor, const std::vector<int64_t>& splits = {},
                        const std::string& name = "");

// For a rank that has run out of data: blocks until every rank has called
// join(), taking part meanwhile in the other ranks' operations with neutral
// data (zeros in sums and averages, no rows in gathers).  Returns the rank
// that joined last (the highest, when several joined in the same round).
// Operations this rank submitted before join() are finished first.
int join();

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
