// ProcessGroup: collectives among a fixed set of ranks.
//
// One object per process and group; rank() is this process's place in the
// group, size() how many take part.  Every collective is asynchronous: it
// checks its arguments at once (throwing loom::Error), enqueues the
// operation and returns a Work; call wait() on it (or use the blocking
// free functions in distributed/DefaultGroup.h).  Every rank must issue the
// same collectives in the same order.  Each collective has timeout(): past
// it, wait() throws an error naming the collective, the rank and the timeout.
//
// Tensors are handles: outputs are written in place.  Inputs and outputs must
// be contiguous, and live on the device kind the backend serves (gloo: CPU,
// and CUDA staged through host memory; nccl: CUDA).
//
// Backends: ProcessGroupGloo (distributed/ProcessGroupGloo.h),
// ProcessGroupNccl (distributed/ProcessGroupNccl.h, CUDA builds).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "distributed/ReduceOp.h"
#include "distributed/Work.h"
#include "tensor/Tensor.h"

namespace loom {
namespace distributed {

class ProcessGroup {
 public:
  ProcessGroup(int rank, int size, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), timeout_(timeout) {}
  virtual ~ProcessGroup() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // "gloo" or "nccl".
  virtual std::string backend() const = 0;
  // Where a tensor that could live anywhere (a count, a header, a flag that
  // DDP or SyncBatchNorm exchanges) must be for this group's collectives:
  // the CPU for gloo; for nccl `hint` when it is a CUDA device, else the
  // group's CUDA device (ProcessGroupNccl::device()).
  virtual Device device_for(Device hint) const {
    (void)hint;
    return Device(kCPU);
  }

  // Reduces tensor across ranks; every rank receives the result.
  virtual WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) = 0;
  // Copies root's tensor into every rank's tensor (same shape and dtype).
  virtual WorkPtr broadcast(Tensor& tensor, int root) = 0;
  // Reduces into root's tensor; other ranks' tensors are left as they were.
  virtual WorkPtr reduce(Tensor& tensor, int root, ReduceOp op = ReduceOp::Sum) = 0;
  // outputs[r] receives rank r's input; outputs.size() == size().
  virtual WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  // output (size() * input.numel() elements, e.g. shape (size * N, ...))
  // receives the inputs concatenated in rank order along dim 0.
  virtual WorkPtr all_gather_into_tensor(Tensor& output, const Tensor& input) = 0;
  // On root, outputs[r] receives rank r's input; elsewhere outputs is ignored
  // (may be empty).
  virtual WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, int root) = 0;
  // Rank r's output receives root's inputs[r]; inputs ignored off root.
  virtual WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) = 0;
  // output receives the reduction over ranks of their inputs[rank()].
  virtual WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                 ReduceOp op = ReduceOp::Sum) = 0;
  // outputs[r] receives rank r's inputs[rank()].
  virtual WorkPtr all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) = 0;
  // Completes once every rank has entered it.
  virtual WorkPtr barrier() = 0;
  // Point to point; the receiver's tensor must match in shape and dtype.
  virtual WorkPtr send(const Tensor& tensor, int dst, int tag = 0) = 0;
  virtual WorkPtr recv(Tensor& tensor, int src, int tag = 0) = 0;

 protected:
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
};

using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

}  // namespace distributed
}  // namespace loom
