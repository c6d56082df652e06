// nn::GroupNorm: normalises each sample's groups of channels of an (N, C, *)
// input, as torch.nn.GroupNorm; with affine, learnable per-channel `weight`
// (initialised to 1) and `bias` (0) of shape (C), named as in PyTorch so
// state_dicts interchange.
#pragma once

#include "nn/Cloneable.h"
#include "nn/ModuleHolder.h"

namespace loom {
namespace nn {

struct GroupNormOptions {
  GroupNormOptions(int64_t num_groups, int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  GroupNormOptions& eps(double v) { eps_ = v; return *this; }
  GroupNormOptions& affine(bool v) { affine_ = v; return *this; }
  int64_t num_groups_;
  int64_t num_channels_;
  double eps_ = 1e-5;
  bool affine_ = true;
};

class GroupNormImpl : public Cloneable<GroupNormImpl> {
 public:
  GroupNormImpl(int64_t num_groups, int64_t num_channels)
      : GroupNormImpl(GroupNormOptions(num_groups, num_channels)) {}
  // Throws loom::Error unless num_groups and num_channels are positive and
  // num_groups divides num_channels.
  explicit GroupNormImpl(GroupNormOptions options);
  void reset() override;
  // weight back to 1 and bias to 0 (when affine).
  void reset_parameters();
  // (N, C, *) -> same shape.  Throws naming the layer and the input's shape
  // unless it has at least 2 dims and C = num_channels.
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;

  GroupNormOptions options;
  Tensor weight;  // (C), or undefined without affine
  Tensor bias;    // (C), or undefined
};
LOOM_MODULE(GroupNorm);

}  // namespace nn
}  // namespace loom
