// nn::SyncBatchNorm: batch normalisation whose training statistics are those
// of the whole global batch, over every rank of a process group.
//
// With data parallelism each rank sees only its share of the batch; plain
// BatchNorm would normalise each share by its own statistics.  SyncBatchNorm
// all-gathers every rank's (count, mean, sum of squared deviations) per
// channel and merges them (Chan et al.'s parallel formula, in float64), so
// ranks with different batch sizes (even zero) are handled exactly.  Backward
// all-reduces the two per-channel sums the input gradient needs (sum of dy,
// sum of dy * (x - mean)) and computes each rank's grad_input; the weight and
// bias gradients are each rank's own share (DDP averages them), as in torch.
// The running statistics are updated with the global mean and the unbiased
// global variance, the same on every rank.
//
// Without a process group (null), or in eval mode, it is BatchNorm (running
// statistics in eval).  Every rank must call forward (and backward) the same
// number of times: each training forward is a collective.
//
// nn::convert_sync_batchnorm(model, group) swaps every BatchNorm1d/2d in a
// model for a SyncBatchNorm sharing its tensors (parameter and buffer names
// unchanged), as torch.nn.SyncBatchNorm.convert_sync_batchnorm.
#pragma once

#include <memory>

#include "distributed/ProcessGroup.h"
#include "nn/modules/BatchNorm.h"

namespace loom {
namespace nn {

// Accepts (N, C), (N, C, L), (N, C, H, W) and (N, C, D, H, W) inputs.
class SyncBatchNormImpl : public BatchNormBase {
 public:
  explicit SyncBatchNormImpl(BatchNormOptions options,
                             distributed::ProcessGroupPtr group = nullptr);
  // Training with a group: synchronised statistics (a collective).  Throws
  // when the input is not (N, C, ...) with C = num_features, or when all ranks
  // together have a single value per channel.
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override;
  void reset() { reset_parameters(); }

  distributed::ProcessGroupPtr process_group;
};
LOOM_MODULE(SyncBatchNorm);

// The functional form: normalises `input` (N, C, ...) with the statistics of
// all ranks' inputs together and, when running_mean/var are given, updates
// them (momentum as in batch_norm; unbiased global variance).  Differentiable
// in input, weight and bias; backward is a collective too.  group may not be
// null.
Tensor sync_batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, double momentum, double eps,
                       const distributed::ProcessGroupPtr& group);

// Replaces every BatchNorm1d/BatchNorm2d in `module` (recursively) by a
// SyncBatchNorm over `group` (null: the default group of
// init_process_group when there is one, else none: local statistics) that shares its weight, bias, running
// statistics and num_batches_tracked and copies eps, momentum, affine and
// track_running_stats and the training mode.  The old module forwards to the
// new one (BatchNormBase::forward_to), so parents holding it as a typed member
// are converted too.  Returns the module (a new SyncBatchNorm when `module`
// itself is a BatchNorm).  Note: a later clone() of a model whose reset()
// builds plain BatchNorm children gives an unconverted copy.
std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module,
                                               distributed::ProcessGroupPtr group = nullptr);
template <typename Holder, typename = decltype(std::declval<Holder>().ptr())>
Holder convert_sync_batchnorm(Holder module, distributed::ProcessGroupPtr group = nullptr) {
  // A BatchNorm holder keeps its BatchNorm, which now forwards to the new module.
  convert_sync_batchnorm(std::shared_ptr<Module>(module.ptr()), std::move(group));
  return module;
}

}  // namespace nn
}  // namespace loom
