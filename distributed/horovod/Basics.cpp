#include "distributed/horovod/Basics.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <mutex>

#include "distributed/DefaultGroup.h"
#include "distributed/Rendezvous.h"
#include "distributed/horovod/Global.h"
#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"
#include "tensor/Factory.h"

namespace loom {
namespace distributed {
namespace horovod {
namespace {

struct Global {
  std::mutex mutex;
  std::unique_ptr<Controller> controller;
  ProcessGroupPtr cpu_group;
  bool created_default_group = false;
  int local_rank = 0;
  int local_size = 1;
};

// Never destroyed: a static destructor at exit must not wait on peers.
Global& global() {
  static Global* g = new Global;
  return *g;
}

// `explicit_value` when >= 0, else the variable's number, else `fallback`.
double setting(double explicit_value, const char* variable, double fallback) {
  if (explicit_value >= 0) return explicit_value;
  const char* text = env_or_null(variable);
  if (!text) return fallback;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  LOOM_CHECK(end != text && *end == '\0' && std::isfinite(value) && value >= 0, "hvd::init: ", variable,
             " must be a number >= 0, got '", text, "'");
  return value;
}

uint64_t host_hash() {
  char name[256] = {0};
  if (::gethostname(name, sizeof name - 1) != 0) return 0;
  return hash_name(name);
}

// This rank's place among the ranks on its machine: from the launcher's
// variables, else from every rank's host name (one all-gather, made on every
// rank so the collectives stay in step).
void find_local_rank(const ProcessGroupPtr& group, int* local_rank, int* local_size) {
  Tensor mine = full({1}, static_cast<int64_t>(host_hash()), TensorOptions(kInt64));
  Tensor all = empty({group->size()}, TensorOptions(kInt64));
  group->all_gather_into_tensor(all, mine)->wait();
  const std::vector<int64_t> hosts = all.to_vector<int64_t>();
  int below = 0, same = 0;
  for (int r = 0; r < group->size(); ++r) {
    if (hosts[r] != hosts[group->rank()]) continue;
    ++same;
    if (r < group->rank()) ++below;
  }
  *local_rank = below;
  *local_size = same;
  const char* launchers[][2] = {{"LOCAL_RANK", "LOCAL_WORLD_SIZE"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                                {"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"}};
  for (const auto& vars : launchers) {
    const char* r = env_or_null(vars[0]);
    const char* n = env_or_null(vars[1]);
    if (!r || !n) continue;
    const int lr = std::atoi(r), ln = std::atoi(n);  // Slurm writes "2(x3)": the leading number
    if (lr >= 0 && lr < ln) {
      *local_rank = lr;
      *local_size = ln;
    }
    return;
  }
}

Global& initialized(const char* who) {
  Global& g = global();
  LOOM_CHECK(g.controller != nullptr, who, ": hvd is not initialised; call hvd::init() first");
  return g;
}

}  // namespace

namespace detail {

Controller& controller(const char* who) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  return *initialized(who).controller;
}

}  // namespace detail

void init(const InitOptions& options) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (g.controller) return;
  LOOM_CHECK(options.timeout.count() > 0, "hvd::init: timeout must be positive, got ", options.timeout.count(),
             " ms");
  ControllerOptions c;
  const double threshold = setting(static_cast<double>(options.fusion_threshold_bytes),
                                   "HOROVOD_FUSION_THRESHOLD", double(int64_t(128) << 20));
  LOOM_CHECK(threshold <= 1e15, "hvd::init: the fusion threshold is too large: ", threshold, " bytes");
  c.fusion_threshold = static_cast<int64_t>(threshold);
  const double cycle_ms = setting(options.cycle_time_ms, "HOROVOD_CYCLE_TIME", 1.0);
  LOOM_CHECK(cycle_ms <= 60000, "hvd::init: the cycle time must be at most 60000 ms, got ", cycle_ms);
  c.cycle_time = std::chrono::microseconds(static_cast<int64_t>(std::llround(cycle_ms * 1000)));
  const double warn_s = setting(options.stall_check_time_s, "HOROVOD_STALL_CHECK_TIME_SECONDS", 60.0);
  // -1: the process group's timeout (set below).
  const double stall_s = setting(options.stall_shutdown_time_s, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", -1.0);
  LOOM_CHECK(warn_s <= 1e7 && stall_s <= 1e7, "hvd::init: stall times must be at most 1e7 s");
  c.stall_warning = std::chrono::milliseconds(std::llround(warn_s * 1000));
  if (stall_s >= 0) c.stall_timeout = std::chrono::milliseconds(std::llround(stall_s * 1000));

  bool created = false;
  if (!distributed::is_initialized()) {
    distributed::InitOptions init;
    init.init_method = options.init_method;
    init.timeout = options.timeout;
    init_process_group("gloo", init);
    created = true;
  }
  try {
    ProcessGroupPtr cpu = new_group({}, "gloo");
    // nccl only when every rank can use it, so every rank makes the same groups.
    const bool can = options.nccl_for_cuda && cuda::built_with_cuda() && cuda::device_count() > 0;
    Tensor flag = full({1}, int64_t(can ? 1 : 0), TensorOptions(kInt64));
    cpu->all_reduce(flag, ReduceOp::Min)->wait();
    ProcessGroupPtr gpu = flag.item<int64_t>() == 1 ? new_group({}, "nccl") : nullptr;
    find_local_rank(cpu, &g.local_rank, &g.local_size);
    if (stall_s < 0) c.stall_timeout = cpu->timeout();
    g.controller = std::make_unique<Controller>(cpu, gpu, c);
    g.cpu_group = cpu;
    g.created_default_group = created;
  } catch (...) {
    if (created) destroy_process_group();
    throw;
  }
}

void shutdown() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (!g.controller) return;
  g.controller.reset();  // stops the thread; fails what is still queued
  try {
    g.cpu_group->barrier()->wait();
  } catch (const std::exception&) {
    // A peer that already left or failed: nothing more to wait for.
  }
  g.cpu_group.reset();
  if (g.created_default_group) destroy_process_group();
  g.created_default_group = false;
}

bool is_initialized() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  return g.controller != nullptr;
}

int rank() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  return initialized("hvd::rank").controller->rank();
}

int size() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  return initialized("hvd::size").controller->size();
}

int local_rank() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  return initialized("hvd::local_rank").local_rank;
}

int local_size() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  return initialized("hvd::local_size").local_size;
}

int64_t fusion_threshold() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  return initialized("hvd::fusion_threshold").controller->options().fusion_threshold;
}

Stats stats() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  const ControllerStats c = initialized("hvd::stats").controller->stats();
  Stats s;
  s.submitted = c.submitted;
  s.rounds = c.rounds;
  s.fused_operations = c.fused_operations;
  s.tensors = c.tensors;
  return s;
}

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
