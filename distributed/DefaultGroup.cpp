#include "distributed/DefaultGroup.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>

#include "distributed/ProcessGroupGloo.h"
#include "distributed/ProcessGroupNccl.h"
#include "distributed/Rendezvous.h"
#include "distributed/store/PrefixStore.h"
#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace {

// The process-wide default group, the store it was made from (new_group
// builds on it) and the groups made since.
struct WorldState {
  std::mutex mutex;
  ProcessGroupPtr default_group;
  std::shared_ptr<Store> store;
  std::string backend;
  std::chrono::milliseconds timeout{0};
  ProcessGroupGlooOptions gloo;
  ProcessGroupNcclOptions nccl;
  int groups_made = 0;
};

WorldState& world() {
  static WorldState state;
  return state;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// Throws unless this process can run the nccl backend (a CUDA build with a
// visible GPU), before any rendezvous.
void check_nccl_available(const char* who) {
  LOOM_CHECK(cuda::built_with_cuda(), who, ": backend 'nccl' needs CUDA, and this build of loom has "
             "none (no CUDA toolkit was found when it was compiled, or LOOM_DISABLE_CUDA=1); use "
             "backend 'gloo' for CPU tensors, or rebuild loom where the CUDA toolkit and NCCL are "
             "installed");
  LOOM_CHECK(cuda::device_count() > 0, who, ": backend 'nccl' needs a GPU per rank, and this process "
             "sees no CUDA device (no GPU or driver, or CUDA_VISIBLE_DEVICES hides them); use backend "
             "'gloo' on machines without GPUs");
}

ProcessGroupPtr make_group(const std::string& backend, std::shared_ptr<Store> store, int rank, int size,
                           std::chrono::milliseconds timeout, ProcessGroupGlooOptions gloo,
                           ProcessGroupNcclOptions nccl) {
  if (backend == "gloo") {
    gloo.timeout = timeout;
    return std::make_shared<ProcessGroupGloo>(std::move(store), rank, size, gloo);
  }
  if (backend == "nccl") {
    check_nccl_available("init_process_group");
    nccl.timeout = timeout;
    return std::make_shared<ProcessGroupNccl>(std::move(store), rank, size, nccl);
  }
  LOOM_FAIL("init_process_group: unknown backend '", backend, "'; expected 'gloo' or 'nccl'");
}

ProcessGroupPtr resolve(const ProcessGroupPtr& group, const char* what) {
  if (group) return group;
  std::lock_guard<std::mutex> lock(world().mutex);
  LOOM_CHECK(world().default_group, what,
             ": the default process group is not initialised; call distributed::init_process_group first "
             "or pass a group");
  return world().default_group;
}

WorkPtr finish(WorkPtr work, bool async_op) {
  if (async_op) return work;
  work->wait();
  return nullptr;
}

}  // namespace

ProcessGroupPtr init_process_group(const std::string& backend_name, InitOptions options) {
  const std::string backend = lower(backend_name);
  LOOM_CHECK(backend == "gloo" || backend == "nccl", "init_process_group: unknown backend '", backend_name,
             "'; expected 'gloo' or 'nccl'");
  LOOM_CHECK(options.timeout.count() > 0, "init_process_group: timeout must be positive, got ",
             options.timeout.count(), " ms");
  {
    std::lock_guard<std::mutex> lock(world().mutex);
    LOOM_CHECK(!world().default_group,
               "init_process_group: the default process group is already initialised; call "
               "destroy_process_group() first");
  }
  if (backend == "nccl") check_nccl_available("init_process_group");
  RendezvousInfo info;
  if (options.store) {
    LOOM_CHECK(options.rank >= 0 && options.world_size >= 1,
               "init_process_group: with an explicit store, rank and world_size must be given (got rank ",
               options.rank, ", world_size ", options.world_size, ")");
    info = rank_from_environment(options.rank, options.world_size);
    info.store = options.store;
  } else {
    info = rendezvous(options.init_method, options.rank, options.world_size, options.timeout);
  }
  // Gloo listens on options.gloo.interface_or_host.  Left at its loopback
  // default, with a master on another machine, use the interface that
  // reaches the master instead, so multi-node jobs work without
  // GLOO_SOCKET_IFNAME (which, when set, still wins inside the backend).
  if (options.gloo.interface_or_host == ProcessGroupGlooOptions().interface_or_host &&
      !info.master_host.empty()) {
    options.gloo.interface_or_host = local_address_towards(info.master_host);
  }
  auto group = make_group(backend, std::make_shared<PrefixStore>("default_pg", info.store), info.rank,
                          info.world_size, options.timeout, options.gloo, options.nccl);
  std::lock_guard<std::mutex> lock(world().mutex);
  world().default_group = group;
  world().store = info.store;
  world().backend = backend;
  world().timeout = options.timeout;
  world().gloo = options.gloo;
  world().nccl = options.nccl;
  world().groups_made = 0;
  return group;
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(world().mutex);
  return world().default_group != nullptr;
}

ProcessGroupPtr default_group() { return resolve(nullptr, "default_group"); }

void destroy_process_group(ProcessGroupPtr group) {
  std::lock_guard<std::mutex> lock(world().mutex);
  if (group && group != world().default_group) return;
  world().default_group.reset();
  world().store.reset();
  world().backend.clear();
  world().groups_made = 0;
}

int get_rank(const ProcessGroupPtr& group) {
  if (group) return group->rank();
  std::lock_guard<std::mutex> lock(world().mutex);
  return world().default_group ? world().default_group->rank() : 0;
}

int get_world_size(const ProcessGroupPtr& group) {
  if (group) return group->size();
  std::lock_guard<std::mutex> lock(world().mutex);
  return world().default_group ? world().default_group->size() : 1;
}

int get_local_rank() {
  const char* text = env_or_null("LOCAL_RANK");
  return text ? std::atoi(text) : 0;
}

std::string get_backend(const ProcessGroupPtr& group) { return resolve(group, "get_backend")->backend(); }

ProcessGroupPtr new_group(const std::vector<int>& ranks, const std::string& backend_name) {
  std::shared_ptr<Store> store;
  std::string backend;
  std::chrono::milliseconds timeout;
  ProcessGroupGlooOptions gloo;
  ProcessGroupNcclOptions nccl;
  int index = 0;
  int my_rank = 0;
  int world_size = 0;
  {
    std::lock_guard<std::mutex> lock(world().mutex);
    LOOM_CHECK(world().default_group, "new_group: call init_process_group first");
    store = world().store;
    backend = backend_name.empty() ? world().backend : lower(backend_name);
    timeout = world().timeout;
    gloo = world().gloo;
    nccl = world().nccl;
    index = world().groups_made++;
    my_rank = world().default_group->rank();
    world_size = world().default_group->size();
  }
  std::vector<int> members = ranks;
  if (members.empty()) {
    for (int r = 0; r < world_size; ++r) members.push_back(r);
  }
  std::vector<int> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    LOOM_CHECK(sorted[i] >= 0 && sorted[i] < world_size, "new_group: rank ", sorted[i],
               " is outside the default group's [0, ", world_size, ")");
    LOOM_CHECK(i == 0 || sorted[i] != sorted[i - 1], "new_group: rank ", sorted[i], " is listed twice");
  }
  const auto it = std::find(members.begin(), members.end(), my_rank);
  if (it == members.end()) return nullptr;
  const int group_rank = static_cast<int>(it - members.begin());
  auto prefixed = std::make_shared<PrefixStore>("group_" + std::to_string(index), store);
  return make_group(backend, prefixed, group_rank, static_cast<int>(members.size()), timeout, gloo, nccl);
}

WorkPtr all_reduce(Tensor& tensor, ReduceOp op, const ProcessGroupPtr& group, bool async_op) {
  return finish(resolve(group, "all_reduce")->all_reduce(tensor, op), async_op);
}

WorkPtr broadcast(Tensor& tensor, int src, const ProcessGroupPtr& group, bool async_op) {
  return finish(resolve(group, "broadcast")->broadcast(tensor, src), async_op);
}

WorkPtr reduce(Tensor& tensor, int dst, ReduceOp op, const ProcessGroupPtr& group, bool async_op) {
  return finish(resolve(group, "reduce")->reduce(tensor, dst, op), async_op);
}

WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input, const ProcessGroupPtr& group,
                   bool async_op) {
  return finish(resolve(group, "all_gather")->all_gather(outputs, input), async_op);
}

WorkPtr all_gather_into_tensor(Tensor& output, const Tensor& input, const ProcessGroupPtr& group,
                               bool async_op) {
  return finish(resolve(group, "all_gather_into_tensor")->all_gather_into_tensor(output, input), async_op);
}

WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, int dst, const ProcessGroupPtr& group,
               bool async_op) {
  return finish(resolve(group, "gather")->gather(outputs, input, dst), async_op);
}

WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, int src, const ProcessGroupPtr& group,
                bool async_op) {
  return finish(resolve(group, "scatter")->scatter(output, inputs, src), async_op);
}

WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                       const ProcessGroupPtr& group, bool async_op) {
  return finish(resolve(group, "reduce_scatter")->reduce_scatter(output, inputs, op), async_op);
}

WorkPtr all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, const ProcessGroupPtr& group,
                   bool async_op) {
  return finish(resolve(group, "all_to_all")->all_to_all(outputs, inputs), async_op);
}

WorkPtr barrier(const ProcessGroupPtr& group, bool async_op) {
  return finish(resolve(group, "barrier")->barrier(), async_op);
}

void send(const Tensor& tensor, int dst, const ProcessGroupPtr& group, int tag) {
  resolve(group, "send")->send(tensor, dst, tag)->wait();
}

void recv(Tensor& tensor, int src, const ProcessGroupPtr& group, int tag) {
  resolve(group, "recv")->recv(tensor, src, tag)->wait();
}

WorkPtr isend(const Tensor& tensor, int dst, const ProcessGroupPtr& group, int tag) {
  return resolve(group, "isend")->send(tensor, dst, tag);
}

WorkPtr irecv(Tensor& tensor, int src, const ProcessGroupPtr& group, int tag) {
  return resolve(group, "irecv")->recv(tensor, src, tag);
}

}  // namespace distributed
}  // namespace loom
