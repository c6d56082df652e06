// hvd::init and the rank queries (Horovod's horovod.torch basics).
//
//   hvd::init();                        // every rank, before any other hvd call
//   cuda::set_device(hvd::local_rank()); // one GPU per process
//   ... hvd::rank(), hvd::size() ...
//   hvd::shutdown();                    // optional, at the end (every rank)
//
// hvd runs on loom's process groups: init() uses the default process group
// when one exists (distributed::init_process_group) and otherwise creates it
// with the gloo backend from the launcher's environment (env://: loomrun,
// torchrun, Slurm, mpirun).  It then makes hvd's own groups over all ranks,
// so hvd's background communication never interleaves with the program's
// own collectives (or DDP's) on the default group:
//   * a gloo group: negotiation, and the payload of CPU tensors;
//   * when every rank sees a GPU (a CUDA build): an nccl group for CUDA
//     tensors (without one, gloo stages CUDA tensors through host memory).
// No new transport: every byte goes through ProcessGroupGloo or
// ProcessGroupNccl.
//
// Settings (InitOptions, or Horovod's environment variables when left at -1):
//   fusion_threshold_bytes  HOROVOD_FUSION_THRESHOLD  128 MiB (0: no fusion)
//   cycle_time_ms           HOROVOD_CYCLE_TIME        1 ms
//   stall_check_time_s      HOROVOD_STALL_CHECK_TIME_SECONDS     60 (0: no warning)
//   stall_shutdown_time_s   HOROVOD_STALL_SHUTDOWN_TIME_SECONDS  the process
//                           group's timeout (0: never)
// The stall times bound how long an operation that only some ranks submitted
// waits for the others (names must match; see distributed/horovod/
// Negotiation.h): past the check time a warning names the missing ranks;
// past the shutdown time it fails on every rank with an error saying so.
// (Horovod never fails by default; loom does, after the timeout, so that
// mismatched programs end instead of hanging.)
// The fusion threshold must be the same on every rank (checked).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "distributed/ProcessGroup.h"

namespace loom {
namespace distributed {
namespace horovod {

struct InitOptions {
  // For the default process group, when init() has to create it.
  std::string init_method = "env://";
  // Rendezvous and collective timeout of the groups init() creates.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  // -1: from the environment variable named above, else the default.
  int64_t fusion_threshold_bytes = -1;
  double cycle_time_ms = -1;
  double stall_check_time_s = -1;
  double stall_shutdown_time_s = -1;
  // Use an nccl group for CUDA tensors when every rank can.
  bool nccl_for_cuda = true;
};

// Starts hvd on this rank.  Collective: every rank calls it, at the same
// point relative to other process-group creation (distributed::new_group).
// A second call while initialised does nothing (as Horovod).  Throws
// loom::Error when the rendezvous fails or a setting is invalid (naming it).
void init(const InitOptions& options = {});
// Stops hvd: fails operations still waiting for other ranks, drops hvd's
// groups, and destroys the default process group when init() created it.
// Every rank should call it (it ends with a barrier, so no rank closes its
// connections while another still uses them).  Does nothing when not
// initialised.
void shutdown();
bool is_initialized();

// This process's rank, the number of ranks, its rank among the processes on
// its machine, and how many those are.  local_rank/local_size come from the
// launcher (LOCAL_RANK and LOCAL_WORLD_SIZE; Slurm's and Open MPI's
// variables), else from the ranks' host names.  Throw loom::Error before
// init() ("call hvd::init() first").
int rank();
int size();
int local_rank();
int local_size();

// hvd's fusion threshold in bytes (after the environment).  Throws before init.
int64_t fusion_threshold();

// What hvd's background thread has done on this rank since init(): for
// tuning the fusion threshold and cycle time, and for tests.
struct Stats {
  int64_t submitted = 0;         // operations queued (tensor ops, gradients, broadcasts)
  int64_t rounds = 0;            // negotiation rounds
  int64_t fused_operations = 0;  // collectives that carried tensors (fused ones count once)
  int64_t tensors = 0;           // tensors they carried
};
// Throws before init.
Stats stats();

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
