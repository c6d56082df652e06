// The default process group and the free functions on it: the
// torch.distributed-shaped entry points (init_process_group, get_rank,
// new_group, all_reduce, ...).  One default group per process, created from
// the launcher's environment.  (The umbrella header of the whole layer is
// distributed/distributed.h.)
//
//   distributed::init_process_group("gloo");          // env:// (loomrun, torchrun, Slurm, mpirun)
//   auto rank = distributed::get_rank();
//   distributed::all_reduce(t);                        // blocking, sum, default group
//   auto work = distributed::all_reduce(t, ReduceOp::Max, nullptr, /*async_op=*/true);
//   distributed::destroy_process_group();
//
// Every function that takes a group uses the default group when it is null.
// Blocking forms wait for the collective; async forms return its Work.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "distributed/ProcessGroup.h"
#include "distributed/ProcessGroupGloo.h"
#include "distributed/ProcessGroupNccl.h"
#include "distributed/store/Store.h"

namespace loom {
namespace distributed {

struct InitOptions {
  // "env://", "tcp://host:port" or "file:///path"; ignored when store is set.
  std::string init_method = "env://";
  // -1: from the environment (see distributed/Rendezvous.h).
  int world_size = -1;
  int rank = -1;
  // For the rendezvous and for every collective of the group.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  // An already connected store (then rank and world_size are required).
  std::shared_ptr<Store> store;
  // Settings of the gloo backend (its timeout is replaced by `timeout`).
  ProcessGroupGlooOptions gloo;
  // Settings of the nccl backend (its timeout is replaced by `timeout`).
  ProcessGroupNcclOptions nccl;
};

// Creates the default process group.  backend: "gloo" (CPU tensors, and
// CUDA tensors staged through host memory) or "nccl" (CUDA tensors, one GPU
// per rank; see distributed/ProcessGroupNccl.h).  Throws loom::Error when
// already initialised, for an unknown backend, when the rendezvous fails, or
// for "nccl" in a build without CUDA or on a machine without a visible GPU
// (checked before the rendezvous, so it fails at once).
ProcessGroupPtr init_process_group(const std::string& backend, InitOptions options = {});
bool is_initialized();
// The default group; throws when init_process_group has not been called.
ProcessGroupPtr default_group();
// Drops the default group (and every group made by new_group) when group is
// null, else nothing but the given group's registration.
void destroy_process_group(ProcessGroupPtr group = nullptr);

// This process's rank in group and the group's size.  Without any process
// group: rank 0 of 1, so single-process code runs unchanged.
int get_rank(const ProcessGroupPtr& group = nullptr);
int get_world_size(const ProcessGroupPtr& group = nullptr);
// LOCAL_RANK from the launcher (0 when unset).
int get_local_rank();
// The backend name of group ("gloo", "nccl").
std::string get_backend(const ProcessGroupPtr& group = nullptr);

// A group of some ranks of the default group.  Every rank of the default
// group must call it with the same ranks, in the same order of calls (like
// torch).  Returns null on ranks that are not members.
ProcessGroupPtr new_group(const std::vector<int>& ranks, const std::string& backend = "");

// Blocking (async_op = false, returns null) or asynchronous collectives on
// group (default group when null).  Argument checks as in ProcessGroup.h.
WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum, const ProcessGroupPtr& group = nullptr,
                   bool async_op = false);
WorkPtr broadcast(Tensor& tensor, int src, const ProcessGroupPtr& group = nullptr, bool async_op = false);
WorkPtr reduce(Tensor& tensor, int dst, ReduceOp op = ReduceOp::Sum, const ProcessGroupPtr& group = nullptr,
               bool async_op = false);
WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input, const ProcessGroupPtr& group = nullptr,
                   bool async_op = false);
WorkPtr all_gather_into_tensor(Tensor& output, const Tensor& input, const ProcessGroupPtr& group = nullptr,
                               bool async_op = false);
WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, int dst,
               const ProcessGroupPtr& group = nullptr, bool async_op = false);
WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, int src,
                const ProcessGroupPtr& group = nullptr, bool async_op = false);
WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::Sum,
                       const ProcessGroupPtr& group = nullptr, bool async_op = false);
WorkPtr all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                   const ProcessGroupPtr& group = nullptr, bool async_op = false);
WorkPtr barrier(const ProcessGroupPtr& group = nullptr, bool async_op = false);
// Point to point: send/recv block; isend/irecv return the Work.
void send(const Tensor& tensor, int dst, const ProcessGroupPtr& group = nullptr, int tag = 0);
void recv(Tensor& tensor, int src, const ProcessGroupPtr& group = nullptr, int tag = 0);
WorkPtr isend(const Tensor& tensor, int dst, const ProcessGroupPtr& group = nullptr, int tag = 0);
WorkPtr irecv(Tensor& tensor, int src, const ProcessGroupPtr& group = nullptr, int tag = 0);

}  // namespace distributed
}  // namespace loom
