// loomrun's command line and the environment it gives each worker, following
// torchrun (torch.distributed.run):
//
//   loomrun [--nproc_per_node N] [--nnodes N] [--node_rank R]
//           [--master_addr A] [--master_port P] [--standalone]
//           [--monitor_interval S] [--grace_period S] [--timeout S]
//           program [args...]
//
// Every flag is also accepted with dashes (--nproc-per-node) and as
// --flag=value; -np N (horovodrun's and mpirun's spelling) is
// --nproc_per_node N.  The first argument that is not a launcher flag (or whatever
// follows "--") is the program; it and everything after it reach the workers
// untouched, flags included.
//
// Worker environment (on top of loomrun's own):
//   MASTER_ADDR, MASTER_PORT   where rank 0's store listens
//   WORLD_SIZE                 nnodes * nproc_per_node
//   RANK                       node_rank * nproc_per_node + local_rank
//   LOCAL_RANK                 0 .. nproc_per_node-1
//   LOCAL_WORLD_SIZE           nproc_per_node
//   GROUP_RANK                 node_rank
//   OMP_NUM_THREADS            only when loomrun's environment does not set
//                              it: max(1, cores / nproc_per_node), so the
//                              workers of a node share its cores instead of
//                              each starting one thread per core.  (torchrun
//                              sets 1; loom's CPU kernels scale with threads,
//                              so an even share is the faster default.)
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace loom {
namespace distributed {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // How often loomrun checks on its workers when nothing else wakes it.
  std::chrono::milliseconds monitor_interval{100};
  // Time workers get between SIGTERM (or a forwarded signal) and SIGKILL.
  std::chrono::milliseconds grace_period{5000};
  // 0: none.  Otherwise workers still running after this long are stopped
  // and loomrun exits with 124.
  std::chrono::milliseconds timeout{0};
  // The program (looked up in PATH unless it contains a '/') and its arguments.
  std::vector<std::string> command;

  int world_size() const { return nnodes * nproc_per_node; }
};

// Parses loomrun's arguments (without argv[0]).  Returns nullopt after
// writing the help text to `help_out` for -h/--help.  Throws loom::Error for
// an unknown flag, a bad value (nproc_per_node < 1, node_rank outside
// [0, nnodes), a port outside [1, 65535], a non-positive monitor interval,
// ...) or a missing program.
std::optional<LaunchOptions> parse_launch_options(const std::vector<std::string>& args,
                                                  std::ostream& help_out);

// The variables set for worker `local_rank` (see above).  omp_threads <= 0:
// leave OMP_NUM_THREADS alone.
std::vector<std::pair<std::string, std::string>> worker_environment(const LaunchOptions& options,
                                                                    int local_rank,
                                                                    int omp_threads);

// OMP_NUM_THREADS for each worker when the environment does not set it:
// max(1, available_cores() / nproc_per_node); 0 when it is set.
int default_omp_threads(int nproc_per_node);

// The number of cores this process may run on (its affinity mask).
int available_cores();

}  // namespace distributed
}  // namespace loom
