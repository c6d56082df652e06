// loomrun: start the worker processes of a distributed loom job on this
// node, as torchrun does.  See LaunchOptions.h for the command line and the
// workers' environment, WorkerGroup.h for how the job ends.
//
//   bazel run //distributed/launch:loomrun -- --nproc_per_node 2 path/to/trainer --epochs 1
#include <cstdio>
#include <iostream>

#include "distributed/launch/LaunchOptions.h"
#include "distributed/launch/WorkerGroup.h"
#include "tensor/Error.h"

int main(int argc, char** argv) {
  using namespace loom::distributed;
  std::optional<LaunchOptions> options;
  try {
    options = parse_launch_options(std::vector<std::string>(argv + 1, argv + argc), std::cout);
  } catch (const std::exception& e) {
    std::cerr << "loomrun: error: " << e.what() << "\n";
    return 2;
  }
  if (!options) return 0;  // --help

  const int omp_threads = default_omp_threads(options->nproc_per_node);
  if (omp_threads > 0 && options->nproc_per_node > 1)
    std::cerr << "loomrun: OMP_NUM_THREADS is not set; giving each of the "
              << options->nproc_per_node << " workers " << omp_threads << " of the "
              << available_cores() << " cores (set OMP_NUM_THREADS to choose)\n";

  std::vector<WorkerSpec> workers;
  for (int local = 0; local < options->nproc_per_node; ++local) {
    WorkerSpec spec;
    spec.local_rank = local;
    spec.rank = options->node_rank * options->nproc_per_node + local;
    spec.command = options->command;
    spec.env = worker_environment(*options, local, omp_threads);
    workers.push_back(std::move(spec));
  }
  WorkerGroupOptions group_options;
  group_options.monitor_interval = options->monitor_interval;
  group_options.grace_period = options->grace_period;
  group_options.timeout = options->timeout;
  std::cout.flush();
  std::cerr.flush();
  try {
    WorkerGroup group(std::move(workers), group_options);
    return group.run();
  } catch (const std::exception& e) {
    std::cerr << "loomrun: error: " << e.what() << "\n";
    return 1;
  }
}
