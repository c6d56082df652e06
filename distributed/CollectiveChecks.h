// Argument checks shared by the process-group backends (gloo, nccl), so both
// reject the same mistakes with the same words.
//
// Every function throws loom::Error whose message starts with
// "<who>::<op>: " (who is the backend class, "ProcessGroupGloo" or
// "ProcessGroupNccl"; op the collective, "all_reduce"), names the argument
// ("tensor", "outputs[2]") and says what was expected and what was got.  They
// run in the calling thread before anything is queued, and are pure host
// logic (tested without any GPU in tests/distributed/process_group).  The
// checks of the collectives over lists of tensors (gather, scatter,
// all_gather, reduce_scatter, all_to_all) are in distributed/GatherScatter.h.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "distributed/ReduceOp.h"
#include "distributed/store/Store.h"
#include "tensor/Tensor.h"

namespace loom {
namespace distributed {
namespace checks {

// Which devices a backend takes tensors on.
enum class Placement {
  kCpuOrCuda,  // gloo with CUDA: CPU tensors, CUDA tensors staged through the host
  kCpuOnly,    // gloo without CUDA
  kCudaOnly,   // nccl; every tensor of one collective on one device (GatherScatter.h)
};

// A backend's constructor: store not null, size >= 1, rank in [0, size),
// timeout positive.  Messages start "<who>: ".
void check_group(const char* who, const std::shared_ptr<Store>& store, int rank, int size,
                 std::chrono::milliseconds timeout);

// "[2, 3]" for messages.
std::string sizes_text(const IntList& sizes);
// "outputs[2]".
std::string name_at(const char* list, size_t index);
// The description of a send or recv (its Work's): "send of 4 float32 to
// rank 1 with tag 0 on rank 0 of 2" (op "send", direction "to"; or "recv",
// "from").
std::string describe_transfer(const char* op, const Tensor& t, const char* direction, int peer,
                              int tag, int rank, int size);

// t is defined, on a device the backend takes, and contiguous.
void check_tensor(const char* who, const char* op, const Tensor& t, const std::string& name,
                  Placement placement);
// root in [0, size).
void check_root(const char* who, const char* op, int root, int size);
// t has ref's dtype and element count.
void check_same(const char* who, const char* op, const Tensor& t, const std::string& name,
                const Tensor& ref, const std::string& ref_name);
// A list holds one tensor per rank.
void check_count(const char* who, const char* op, const char* name, size_t got, int size);
// t is on ref's device (nccl: one communicator per device, so every tensor
// of a collective must share one).
void check_same_device(const char* who, const char* op, const Tensor& t, const std::string& name,
                       const Tensor& ref, const std::string& ref_name);
// Point to point: peer is another rank in [0, size); tag >= 0.
void check_peer(const char* who, const char* op, const char* name, int peer, int rank, int size,
                int tag);
// all_gather_into_tensor: same dtype, output.numel() == size * input.numel().
void check_all_gather_into_tensor(const char* who, const Tensor& output, const Tensor& input,
                                  int size);
// The reduce op is defined for dtype: avg needs a floating dtype; bool takes
// sum/max (logical or) and product/min (logical and).
void check_reduce_op(const char* who, ReduceOp op, DType dtype);

}  // namespace checks
}  // namespace distributed
}  // namespace loom
