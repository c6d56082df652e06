// nn::BatchNorm1d / BatchNorm2d: normalisation over dim 1 with running
// statistics (running_mean, running_var, num_batches_tracked buffers, named as
// in PyTorch so checkpoints interchange).
#pragma once

#include "nn/Cloneable.h"
#include "nn/ModuleHolder.h"

namespace loom {
namespace nn {

struct BatchNormOptions {
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT
  BatchNormOptions& eps(double v) { eps_ = v; return *this; }
  // Weight of the newest batch in the running statistics; nullopt means a
  // cumulative average (1 / num_batches_tracked), as PyTorch's momentum=None.
  BatchNormOptions& momentum(std::optional<double> v) { momentum_ = v; return *this; }
  BatchNormOptions& affine(bool v) { affine_ = v; return *this; }
  BatchNormOptions& track_running_stats(bool v) { track_running_stats_ = v; return *this; }
  int64_t num_features_;
  double eps_ = 1e-5;
  std::optional<double> momentum_ = 0.1;
  bool affine_ = true;
  bool track_running_stats_ = true;
};

// Shared by the 1-d and 2-d variants; `expected_dims` lists the accepted ranks.
class BatchNormBase : public Module {
 public:
  BatchNormBase(std::string type_name, BatchNormOptions options, std::vector<int64_t> expected_dims);
  Tensor forward(const Tensor& input) override;
  // relu(forward(input)), in one pass over the activations where the
  // kernels fuse it (batch_norm_relu): for models written "bn, then ReLU".
  Tensor forward_relu(const Tensor& input);
  // relu(forward(input) + residual), in one pass where the kernels fuse it
  // (batch_norm_add_relu): ResNet's "bn3, add the identity, ReLU".
  Tensor forward_add_relu(const Tensor& input, const Tensor& residual);
  void pretty_print(std::ostream& out) const override;
  // Running statistics back to mean 0, variance 1, no batches seen.
  void reset_running_stats();

  BatchNormOptions options;
  Tensor weight;               // (C) or undefined without affine
  Tensor bias;                 // (C) or undefined
  Tensor running_mean;         // (C) or undefined without tracking
  Tensor running_var;          // (C)
  Tensor num_batches_tracked;  // () int64

  // When set, forward() runs this module instead.  nn::convert_sync_batchnorm
  // (distributed/parallel/SyncBatchNorm.h) replaces a registered BatchNorm by
  // a SyncBatchNorm sharing its tensors and points the old one here, so a
  // parent that calls it through its own typed member (ResNet's bn1) uses the
  // synchronised statistics too.
  std::shared_ptr<Module> forward_to;

 protected:
  void reset_parameters();

 private:
  Tensor run(const Tensor& input, bool relu, const Tensor& residual = Tensor());

  std::vector<int64_t> expected_dims_;
};

// (N, C) or (N, C, L).
class BatchNorm1dImpl : public BatchNormBase {
 public:
  explicit BatchNorm1dImpl(BatchNormOptions options);
  void reset() { reset_parameters(); }
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override;
};
LOOM_MODULE(BatchNorm1d);

// (N, C, H, W).
class BatchNorm2dImpl : public BatchNormBase {
 public:
  explicit BatchNorm2dImpl(BatchNormOptions options);
  void reset() { reset_parameters(); }
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override;
};
LOOM_MODULE(BatchNorm2d);

}  // namespace nn
}  // namespace loom
