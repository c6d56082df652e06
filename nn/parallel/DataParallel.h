// nn::DataParallel: one process, several devices, PyTorch's nn.DataParallel.
//
//   nn::models::ConvNet model;                          // on cpu:0 (device_ids[0])
//   nn::DataParallel dp(model, {Device("cpu:0"), Device("cpu:1")});
//   optim::SGD opt(model->parameters(), optim::SGDOptions(0.01));  // the module's own
//   Tensor loss = cross_entropy(dp(images), labels);    // logits on cpu:0
//   loss.backward();                                    // grads summed into model's .grad
//   opt.step();
//
// Each forward
//   1. scatters the inputs: every tensor is split along `dim` as
//      Tensor::chunk(device_ids.size(), dim) splits it (the last chunk may be
//      smaller; a batch smaller than the device count gives fewer chunks and
//      uses fewer replicas); other arguments go to every replica as they are;
//   2. brings the replicas up to date (nn/parallel/Replica.h): replica 0 is
//      the module itself, replicas 1.. are clones kept from one forward to
//      the next; only parameters and buffers that changed are copied (on CPU
//      logical devices parameters share the module's host memory: nothing
//      to copy), and the broadcast is differentiable (each replica
//      parameter's gradient is sent back and summed into the original
//      parameter's .grad);
//   3. runs replica k on device_ids[k]'s compute stream (tensor/Stream.h:
//      on a CPU logical device its worker thread with its share of the
//      cores; on a GPU its launcher thread), all at once, and waits for them;
//      the backward pass then runs on the autograd engine's per-device
//      threads, again all devices at once;
//   4. gathers the outputs on `output_device`, concatenated along `dim`
//      (differentiable, so the loss's gradient flows back to every replica).
// With one device in device_ids the module is called directly on the
// caller's thread, the inputs moved to that device.
//
// Parameters and buffers must be on device_ids[0]; a forward checks that and
// throws naming the first one that is not.
//
// BatchNorm: as in PyTorch, each replica normalises its chunk with the
// chunk's own statistics, and the running statistics kept are those of
// replica 0 (the module itself updates them; the other replicas' updates
// are overwritten by the next forward's copy).  For statistics over the
// whole batch use DistributedDataParallel with SyncBatchNorm
// (distributed/parallel/SyncBatchNorm.h), as PyTorch recommends.
//
// Threads: replicas run concurrently, so the forward must not touch shared
// mutable state outside the module (each replica has its own buffers and
// modules) nor write parameters in place (on CPU logical devices replicas
// read the module's parameter memory).  On CPU logical devices give each device its
// threads with set_device_num_threads and the calling thread (which runs
// device_ids[0]'s backward) the same count with set_num_threads.  Do not
// call forward from a closure running on one of device_ids' default streams
// (it would wait for itself).
//
// Errors: loom::Error for a null module, device_ids mixing CPU and CUDA, a
// missing GPU, a module on the wrong device, inputs with no tensor or with tensors that
// split into different numbers of chunks, or a replica's failure (the
// message names the replica and its device).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/Module.h"
#include "nn/ModuleHolder.h"
#include "nn/parallel/Replica.h"
#include "nn/parallel/ScatterGather.h"

namespace loom {
namespace nn {

// How replicas are made before each forward.  kKeep is the default and the
// reason to use loom's DataParallel; kBroadcastAll and kCloneEveryForward
// reproduce what PyTorch does, to measure what keeping replicas saves
// (bench/data_parallel_bench.cpp).
enum class Replication {
  // Replicas kept between forwards.  On CPU logical devices parameters share
  // the module's host memory (and their gradients come back without a
  // copy); everything else (buffers; every tensor on GPUs) is copied in
  // place when its version changed.
  kKeep,
  // As kKeep without sharing host memory: what kKeep does on GPUs, on any
  // device (every tensor copied in place when its version changed).
  kKeepCopies,
  // Replicas kept, but every parameter and buffer copied into newly
  // allocated memory every forward (PyTorch's broadcast traffic).
  kBroadcastAll,
  // New replicas cloned every forward (PyTorch's replicate()).
  kCloneEveryForward,
};

// What the last forward did to bring the replicas up to date.
struct ReplicationStats {
  int64_t replicas = 0;         // replicas that ran (chunks of the batch)
  int64_t replicas_built = 0;   // replicas cloned in this forward
  int64_t tensors_copied = 0;   // parameters and buffers copied into replicas
  int64_t tensors_shared = 0;   // parameters made to share the module's host memory
  int64_t tensors_skipped = 0;  // ... left alone: unchanged since the last copy, or shared
  int64_t bytes_copied = 0;     // bytes copied, clones included
  double build_ms = 0;          // cloning and linking, on the calling thread
  double copy_ms = 0;           // until every replica had its copies (they copy concurrently)
};

class DataParallelImpl : public Module {
 public:
  // Wraps `module` (registered as child "module": parameters() are the
  // module's, state_dict() keys read "module.fc.weight").  device_ids empty:
  // every device of the module's type (the GPUs visible for a CUDA module;
  // for a CPU module cpu:0 .. cpu:T-1, one logical device per intra-op
  // thread, T = get_num_threads()).  output_device: device_ids[0] unless
  // given.  dim: the dimension inputs are split and outputs joined along
  // (negative counts from the end).  Throws loom::Error for a null module,
  // device_ids mixing CPU and CUDA, a CUDA device that does not exist, or no
  // visible GPU for a CUDA module.
  explicit DataParallelImpl(std::shared_ptr<Module> module, std::vector<Device> device_ids = {},
                            std::optional<Device> output_device = std::nullopt,
                            int64_t dim = 0);

  // The module's single-tensor forward on every replica.
  Tensor forward(const Tensor& input) override;

  // Any forward signature: `fn(replica, chunk...)` runs once per replica,
  // concurrently, on the replica's device stream, with `inputs` scattered
  // (tensors in std::vector, std::tuple and std::pair, nested, are split
  // along dim; other values are passed to every replica as they are).  It
  // returns a Tensor or a std::vector/std::tuple/std::pair of them (nested),
  // gathered on output_device.  M is the module's type (the replicas are
  // clones, so of the same type); fn must be safe to run on several threads
  // at once.
  //   auto [a, b] = dp->forward_with<TwoHeadsImpl>(
  //       [](TwoHeadsImpl& m, const Tensor& x, const std::vector<Tensor>& extra) {
  //         return m.forward(x, extra);
  //       }, x, extra);
  template <typename M = Module, typename Fn, typename... Inputs>
  auto forward_with(Fn&& fn, const Inputs&... inputs);

  // The wrapped module (replica 0).
  const std::shared_ptr<Module>& module() const { return module_; }
  template <typename M>
  std::shared_ptr<M> module_as() const {
    auto m = std::dynamic_pointer_cast<M>(module_);
    LOOM_CHECK(m != nullptr, "DataParallel::module_as: the wrapped module is a ",
               module_->type_name(), ", not the requested type");
    return m;
  }
  const std::vector<Device>& device_ids() const { return device_ids_; }
  Device output_device() const { return output_device_; }
  int64_t dim() const { return dim_; }

  // How replicas are made (default kKeep); changing it drops the replicas.
  void set_replication(Replication replication);
  Replication replication() const { return replication_; }
  const ReplicationStats& last_stats() const { return stats_; }
  // Replica k (1 <= k < device_ids().size()) as kept now, or null when it
  // has not been built (yet).  Replica 0 is module().
  std::shared_ptr<Module> replica(size_t k) const;
  // Drops the replicas; the next forward clones them again.  Needed only
  // after changes the version counters do not see: writes through
  // data_ptr(), or plain (unregistered) members of a module.
  void invalidate_replicas();

  // Moves the module (replicas are dropped); forward then needs the module
  // on device_ids[0] as always.
  void to(Device device, bool non_blocking = false) override;
  void to(DType dtype) override;
  void pretty_print(std::ostream& out) const override;

 private:
  // How replicas follow the module under replication_.
  parallel::SyncPolicy sync_policy() const;
  // Checks the placement of parameters and buffers and drops replicas whose
  // layout no longer matches; returns the module's state for this forward.
  const parallel::ModuleState& begin_forward();
  // Runs fn(replica, k) for k < chunks on device_ids[k]'s compute stream, all
  // at once, after bringing replicas 1..chunks-1 up to date; waits for all;
  // rethrows the first failure naming the replica and device.
  void run_replicas(size_t chunks, const std::function<void(Module&, size_t)>& fn);
  template <typename M>
  M& as(Module& m) const {
    if constexpr (std::is_same_v<M, Module>) {
      return m;
    } else {
      M* typed = dynamic_cast<M*>(&m);
      LOOM_CHECK(typed != nullptr, "DataParallel::forward_with: the module is a ", m.type_name(),
                 ", not the type fn takes");
      return *typed;
    }
  }

  std::shared_ptr<Module> module_;
  std::vector<Device> device_ids_;
  Device output_device_;
  int64_t dim_ = 0;
  Replication replication_ = Replication::kKeep;
  parallel::ModuleState state_;
  std::vector<std::unique_ptr<parallel::Replica>> replicas_;  // [0] unused (the module)
  ReplicationStats stats_;
};

// The handle: nn::DataParallel dp(model, {Device("cpu:0"), Device("cpu:1")}).
class DataParallel : public ModuleHolder<DataParallelImpl> {
 public:
  DataParallel(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  DataParallel(std::shared_ptr<DataParallelImpl> impl)     // NOLINT
      : ModuleHolder(std::move(impl)) {}
  explicit DataParallel(std::shared_ptr<Module> module, std::vector<Device> device_ids = {},
                        std::optional<Device> output_device = std::nullopt, int64_t dim = 0)
      : ModuleHolder(std::make_shared<DataParallelImpl>(std::move(module), std::move(device_ids),
                                                        output_device, dim)) {}
  // From a module holder (nn::Linear, nn::models::ConvNet, ...).
  template <typename Holder, typename = decltype(std::declval<Holder>().ptr())>
  explicit DataParallel(const Holder& module, std::vector<Device> device_ids = {},
                        std::optional<Device> output_device = std::nullopt, int64_t dim = 0)
      : DataParallel(std::shared_ptr<Module>(module.ptr()), std::move(device_ids), output_device,
                     dim) {}
};

// ---- template definitions ---------------------------------------------------

template <typename M, typename Fn, typename... Inputs>
auto DataParallelImpl::forward_with(Fn&& fn, const Inputs&... inputs) {
  using Out = std::decay_t<std::invoke_result_t<Fn&, M&, const Inputs&...>>;
  begin_forward();
  const std::tuple<Inputs...> packed(inputs...);
  auto call = [&](Module& replica, const std::tuple<Inputs...>& args) -> Out {
    M& typed = as<M>(replica);
    return std::apply([&](const Inputs&... a) -> Out { return fn(typed, a...); }, args);
  };
  if (device_ids_.size() == 1) return call(*module_, parallel::move_to(packed, device_ids_[0]));
  const std::vector<std::tuple<Inputs...>> chunks =
      parallel::scatter(packed, device_ids_.size(), dim_);
  std::vector<std::optional<Out>> outputs(chunks.size());
  run_replicas(chunks.size(), [&](Module& replica, size_t k) {
    outputs[k] = call(replica, parallel::move_to(chunks[k], device_ids_[k]));
  });
  std::vector<Out> gathered;
  gathered.reserve(outputs.size());
  for (auto& out : outputs) gathered.push_back(std::move(*out));
  return parallel::gather(gathered, output_device_, dim_);
}

}  // namespace nn
}  // namespace loom
