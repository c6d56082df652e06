// DistributedDataParallel: data-parallel training over a process group.
//
// Every rank holds a replica of the model and feeds it its own share of the
// batch.  DDP keeps the replicas identical: at construction it checks that
// all ranks have the same parameters (count, shapes, dtypes; a mismatch is a
// loom::Error listing it) and broadcasts rank 0's parameters and buffers;
// during backward its Reducer (distributed/parallel/Reducer.h) all-reduces the
// gradients bucket by bucket while backward is still running, so when
// backward() returns every rank's .grad holds the average over ranks, and
// identical optimizer steps keep the replicas equal.  With broadcast_buffers,
// rank 0's buffers (BatchNorm running statistics) are broadcast before each
// forward.
//
//   auto pg = std::make_shared<ProcessGroupGloo>(store, rank, size);
//   auto model = nn::models::ConvNet();
//   distributed::DistributedDataParallel ddp(model, pg);
//   optim::SGD opt(ddp->parameters(), 0.01);
//   Tensor loss = nn::functional::cross_entropy(ddp->forward(x), y);
//   loss.backward();   // gradients are averaged across ranks here
//   opt.step();
//
// DDP is a module holder: the wrapped module is its child "module", so
// ddp->parameters() are the model's parameters and ddp->state_dict() keys
// read "module.fc.weight" as in PyTorch.  ddp->forward(x) calls the module's
// single-tensor forward; modules with other signatures go through
// forward_with(fn).  The model may span several devices (model parallel):
// buckets are made per device and dtype.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "distributed/ProcessGroup.h"
#include "distributed/parallel/Reducer.h"
#include "nn/Module.h"
#include "nn/ModuleHolder.h"

namespace loom {
namespace distributed {

struct DDPOptions {
  // Empty: use the module where it is (any devices).  One device: every
  // parameter must already be there (a check, as torch's device_ids=[i]).
  std::vector<Device> device_ids;
  // Target bucket size (MiB) of every bucket but the first.
  double bucket_cap_mb = 25;
  // Target size of the first bucket, the one all-reduced first: small, so
  // communication starts early (torch's 1 MiB, kDefaultFirstBucketBytes).
  double first_bucket_cap_mb = 1;
  // Broadcast rank 0's buffers before each forward.
  bool broadcast_buffers = true;
  // Search the graph after each forward for parameters that get no gradient
  // (costs one graph walk per forward and one small all-reduce per backward).
  bool find_unused_parameters = false;
  // .grad of each parameter is a view into its bucket: no copies, less memory.
  bool gradient_as_bucket_view = false;
};

class DistributedDataParallelImpl : public nn::Module {
 public:
  // Wraps `module` (registered as child "module").  A null group means the
  // default group (init_process_group).  Collective: every rank must construct
  // its DDP at the same point.  Throws when the module is null, there is no
  // group, options are invalid, device_ids do not match the parameters, or
  // the ranks' parameters differ.
  DistributedDataParallelImpl(std::shared_ptr<nn::Module> module, ProcessGroupPtr group = nullptr,
                              DDPOptions options = {});
  // From a module holder (nn::Linear, nn::models::ConvNet, ...).
  template <typename Holder, typename = decltype(std::declval<Holder>().ptr())>
  DistributedDataParallelImpl(const Holder& module, ProcessGroupPtr group = nullptr,
                              DDPOptions options = {})
      : DistributedDataParallelImpl(std::shared_ptr<nn::Module>(module.ptr()), std::move(group),
                                    std::move(options)) {}

  // Runs the module's forward(input) between DDP's pre-forward (buffer
  // broadcast) and post-forward (arming the reducer; the unused-parameter
  // search) steps.
  Tensor forward(const Tensor& input) override;
  // The same for any forward: fn calls the wrapped module and returns a
  // Tensor or a std::vector<Tensor> (the outputs the loss is computed from).
  //   ddp->forward_with([&] { return net->forward(a, b); });
  template <typename Fn>
  auto forward_with(Fn&& fn) -> decltype(fn()) {
    pre_forward();
    auto out = fn();
    post_forward(as_outputs(out));
    return out;
  }

  // The wrapped module.
  const std::shared_ptr<nn::Module>& module() const { return module_; }
  template <typename M>
  std::shared_ptr<M> module_as() const {
    auto m = std::dynamic_pointer_cast<M>(module_);
    LOOM_CHECK(m != nullptr, "DistributedDataParallel::module_as: the wrapped module is a ",
               module_->type_name(), ", not the requested type");
    return m;
  }
  const ProcessGroupPtr& process_group() const { return group_; }
  const DDPOptions& options() const { return options_; }
  const Reducer& reducer() const { return *reducer_; }
  // PyTorch's built-in communication hooks: kFp16Compress / kBf16Compress
  // all-reduce every gradient bucket as float16 / bfloat16 (half the bytes;
  // divided by the world size first), kAllReduce restores the default.
  // Call before the first forward.
  enum class CommHook { kAllReduce, kFp16Compress, kBf16Compress };
  void register_comm_hook(CommHook hook);
  // Bucket sizes in bytes, in all-reduce order.
  std::vector<size_t> bucket_sizes() const;
  // Names of the parameters in each bucket, in all-reduce order.
  std::vector<std::vector<std::string>> bucket_parameter_names() const;
  // When each bucket became ready, was launched and finished in the last
  // synchronised iteration, and when backward ended.
  ReducerTimeline last_timeline() const { return reducer_->last_timeline(); }

  // While the returned guard lives, forward/backward accumulate gradients
  // locally with no communication; the first synchronised backward after it
  // all-reduces the accumulated gradients.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallelImpl* ddp);
    NoSyncGuard(NoSyncGuard&& other) noexcept;
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;
    ~NoSyncGuard();

   private:
    DistributedDataParallelImpl* ddp_;
    bool previous_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(this); }
  bool require_gradient_sync() const { return require_sync_; }

  void pretty_print(std::ostream& out) const override;

 private:
  void pre_forward();
  void post_forward(const std::vector<Tensor>& outputs);
  static std::vector<Tensor> as_outputs(const Tensor& t) { return {t}; }
  static std::vector<Tensor> as_outputs(const std::vector<Tensor>& ts) { return ts; }
  void verify_replicas_match(const std::vector<std::pair<std::string, Tensor>>& params);

  std::shared_ptr<nn::Module> module_;
  ProcessGroupPtr group_;
  DDPOptions options_;
  std::unique_ptr<Reducer> reducer_;
  std::vector<std::string> param_names_;
  bool require_sync_ = true;
};
LOOM_MODULE(DistributedDataParallel);

// Broadcasts root's tensors into every rank's tensors, coalesced into one
// flat buffer per device (CPU tensors of every dtype travel as one byte
// buffer) or, off the CPU, per dtype and device: one collective each, in a
// fixed order.
// Tensors need not be contiguous; values are written in place without
// recording autograd history.  Collective.
void broadcast_coalesced(const std::vector<Tensor>& tensors, const ProcessGroupPtr& group,
                         int root = 0);

}  // namespace distributed
}  // namespace loom
