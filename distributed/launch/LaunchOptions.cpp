#include "distributed/launch/LaunchOptions.h"

#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>

#include "distributed/launch/Spawn.h"
#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace {

std::chrono::milliseconds seconds_to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

}  // namespace

std::optional<LaunchOptions> parse_launch_options(const std::vector<std::string>& args,
                                                  std::ostream& help_out) {
  LaunchOptions options;
  std::string nproc = "1";
  double monitor_interval = 0.1, grace_period = 5.0, timeout = 0.0;
  bool standalone = false;

  CLI::App app{
      "loomrun: start the workers of a distributed job on this node, as torchrun does.\n"
      "Each worker runs `program args...` with MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK,\n"
      "LOCAL_RANK, LOCAL_WORLD_SIZE and GROUP_RANK set; its output lines are prefixed\n"
      "with [rank<RANK>]: .  When a worker fails, the others are stopped and loomrun\n"
      "exits with the failed worker's exit code.",
      "loomrun"};
  app.footer(
      "After the options: program [args...]  (the program and everything after it, flags\n"
      "included, go to the workers unchanged; \"--\" may separate them from loomrun's options)");
  app.add_option("--nproc_per_node,--nproc-per-node", nproc,
                 "Workers on this node: a number, or 'auto'/'cpu' for one per core (-np N, as "
                 "horovodrun and mpirun spell it, is the same)")
      ->capture_default_str();
  app.add_option("--nnodes", options.nnodes, "Number of nodes")->capture_default_str();
  app.add_option("--node_rank,--node-rank", options.node_rank, "This node's rank in [0, nnodes)")
      ->capture_default_str();
  app.add_option("--master_addr,--master-addr", options.master_addr,
                 "Address of the node that runs rank 0")
      ->capture_default_str();
  app.add_option("--master_port,--master-port", options.master_port,
                 "Port of rank 0's store on master_addr")
      ->capture_default_str();
  app.add_flag("--standalone", standalone,
               "Single node: master on 127.0.0.1 at a free port (overrides master_addr/port)");
  app.add_option("--monitor_interval,--monitor-interval", monitor_interval,
                 "Seconds between checks on the workers")
      ->capture_default_str();
  app.add_option("--grace_period,--grace-period", grace_period,
                 "Seconds workers get to exit after SIGTERM before SIGKILL")
      ->capture_default_str();
  app.add_option("--timeout", timeout, "Stop the workers after this many seconds (0: never)")
      ->capture_default_str();

  // The launcher's flags end at the first argument that is neither a flag
  // nor a flag's value, or at "--"; CLI11 sees only that part.
  std::vector<std::string> own;
  size_t i = 0;
  while (i < args.size()) {
    std::string arg = args[i];
    // Horovod's (and mpirun's) -np N is --nproc_per_node N.
    if (arg == "-np") arg = "--nproc_per_node";
    else if (arg.rfind("-np=", 0) == 0) arg = "--nproc_per_node=" + arg.substr(4);
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;
    own.push_back(arg);
    ++i;
    if (arg.find('=') != std::string::npos) continue;
    const CLI::Option* opt = app.get_option_no_throw(arg);
    if (opt != nullptr && opt->get_items_expected_min() > 0 && i < args.size())
      own.push_back(args[i++]);
  }
  options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());

  try {
    std::vector<std::string> reversed(own.rbegin(), own.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    help_out << app.help();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    LOOM_FAIL(e.what());
  }

  if (nproc == "auto" || nproc == "cpu") {
    options.nproc_per_node = available_cores();
  } else {
    char* end = nullptr;
    const long value = std::strtol(nproc.c_str(), &end, 10);
    LOOM_CHECK(!nproc.empty() && *end == '\0' && value >= 1 && value <= 65536,
               "--nproc_per_node must be a positive integer, 'auto' or 'cpu', got '", nproc, "'");
    options.nproc_per_node = static_cast<int>(value);
  }
  LOOM_CHECK(options.nnodes >= 1, "--nnodes must be >= 1, got ", options.nnodes);
  LOOM_CHECK(options.node_rank >= 0 && options.node_rank < options.nnodes,
             "--node_rank must be in [0, nnodes) = [0, ", options.nnodes, "), got ",
             options.node_rank);
  LOOM_CHECK(static_cast<int64_t>(options.nnodes) * options.nproc_per_node <= (1 << 24),
             "--nnodes * --nproc_per_node is too large: ", options.nnodes, " * ",
             options.nproc_per_node);
  if (standalone) {
    LOOM_CHECK(options.nnodes == 1, "--standalone runs a single node, but --nnodes is ",
               options.nnodes);
    options.master_addr = "127.0.0.1";
    options.master_port = find_free_port();
  }
  LOOM_CHECK(!options.master_addr.empty(), "--master_addr is empty");
  LOOM_CHECK(options.master_port >= 1 && options.master_port <= 65535,
             "--master_port must be in [1, 65535], got ", options.master_port);
  LOOM_CHECK(monitor_interval > 0 && monitor_interval <= 3600,
             "--monitor_interval must be in (0, 3600] seconds, got ", monitor_interval);
  LOOM_CHECK(grace_period >= 0 && grace_period <= 86400,
             "--grace_period must be in [0, 86400] seconds, got ", grace_period);
  LOOM_CHECK(timeout >= 0 && timeout <= 1e8, "--timeout must be >= 0 seconds (0: none), got ",
             timeout);
  options.monitor_interval = std::max(seconds_to_ms(monitor_interval), std::chrono::milliseconds(1));
  options.grace_period = seconds_to_ms(grace_period);
  options.timeout = seconds_to_ms(timeout);
  LOOM_CHECK(!options.command.empty(),
             "no program given: usage: loomrun [OPTIONS] program [args...] (--help for options)");
  LOOM_CHECK(!options.command[0].empty(), "the program name is empty");
  return options;
}

std::vector<std::pair<std::string, std::string>> worker_environment(const LaunchOptions& options,
                                                                    int local_rank,
                                                                    int omp_threads) {
  LOOM_CHECK(local_rank >= 0 && local_rank < options.nproc_per_node,
             "worker_environment: local_rank must be in [0, ", options.nproc_per_node, "), got ",
             local_rank);
  const int rank = options.node_rank * options.nproc_per_node + local_rank;
  std::vector<std::pair<std::string, std::string>> env = {
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(options.master_port)},
      {"WORLD_SIZE", std::to_string(options.world_size())},
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
  };
  if (omp_threads > 0) env.emplace_back("OMP_NUM_THREADS", std::to_string(omp_threads));
  return env;
}

int default_omp_threads(int nproc_per_node) {
  const char* set = std::getenv("OMP_NUM_THREADS");
  if (set != nullptr && *set != '\0') return 0;
  return std::max(1, available_cores() / std::max(1, nproc_per_node));
}

int available_cores() {
  int cores = 0;
  cpu_set_t mask;
  if (::sched_getaffinity(0, sizeof mask, &mask) == 0) cores = CPU_COUNT(&mask);
  if (cores <= 0) cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  return std::max(1, cores);
}

}  // namespace distributed
}  // namespace loom
