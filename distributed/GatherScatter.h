// What the gloo and nccl process groups share for the collectives that pair
// one tensor with a list of one tensor per rank (gather, scatter, all_gather,
// reduce_scatter) or take two such lists (all_to_all):
//
// * the argument checks of those collectives, so both backends reject the
//   same mistakes, in the same order, with the same words (built on the
//   single-tensor checks of distributed/CollectiveChecks.h);
// * back_to_back: whether a list already lies back to back in one buffer, so
//   that a backend hands it to the transport in place instead of packing it
//   into (or unpacking it from) a scratch buffer.
//
// Each check throws loom::Error starting "<who>::<op>: " (see
// CollectiveChecks.h).  With Placement::kCudaOnly (nccl: one communicator
// per device) every tensor of the collective must also be on one device.
#pragma once

#include <vector>

#include "distributed/CollectiveChecks.h"
#include "tensor/Tensor.h"

namespace loom {
namespace distributed {
namespace checks {

// gather: `input`, root, and on the root `outputs`: size() tensors, each
// with input's dtype and element count.  Off the root outputs is ignored.
void check_gather(const char* who, const std::vector<Tensor>& outputs, const Tensor& input,
                  int root, int rank, int size, Placement placement);
// scatter: `output`, root, and on the root `inputs`: size() tensors, each
// with output's dtype and element count.  Off the root inputs is ignored.
void check_scatter(const char* who, const Tensor& output, const std::vector<Tensor>& inputs,
                   int root, int rank, int size, Placement placement);
// all_gather: `input`, and size() outputs, each like input.
void check_all_gather(const char* who, const std::vector<Tensor>& outputs, const Tensor& input,
                      int size, Placement placement);
// reduce_scatter: `output`, and size() inputs, each like output.  (The reduce
// op is the caller's to check: check_reduce_op.)
void check_reduce_scatter(const char* who, const Tensor& output,
                          const std::vector<Tensor>& inputs, int size, Placement placement);
// all_to_all: size() inputs and size() outputs (sizes may differ per rank),
// one dtype throughout, and outputs[rank] as large as inputs[rank] (a rank's
// message to itself).
void check_all_to_all(const char* who, const std::vector<Tensor>& outputs,
                      const std::vector<Tensor>& inputs, int rank, int size,
                      Placement placement);

}  // namespace checks

// The start of one buffer holding the data of `tensors` back to back (each
// contiguous, tensors[i + 1] starting where tensors[i] ends), or null when
// they do not, when the list is empty or when one of them has no elements.
char* back_to_back(const std::vector<Tensor>& tensors);

}  // namespace distributed
}  // namespace loom
