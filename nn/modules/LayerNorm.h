// nn::LayerNorm: normalises over the trailing normalized_shape dims of its
// input, as torch.nn.LayerNorm; with elementwise_affine, learnable `weight`
// (initialised to 1) and `bias` (0) of shape normalized_shape, named as in
// PyTorch so state_dicts interchange.
#pragma once

#include "nn/Cloneable.h"
#include "nn/ModuleHolder.h"

namespace loom {
namespace nn {

struct LayerNormOptions {
  LayerNormOptions(std::vector<int64_t> normalized_shape)  // NOLINT: LayerNormOptions({4})
      : normalized_shape_(std::move(normalized_shape)) {}
  LayerNormOptions& eps(double v) { eps_ = v; return *this; }
  LayerNormOptions& elementwise_affine(bool v) { elementwise_affine_ = v; return *this; }
  std::vector<int64_t> normalized_shape_;
  double eps_ = 1e-5;
  bool elementwise_affine_ = true;
};

class LayerNormImpl : public Cloneable<LayerNormImpl> {
 public:
  // Throws loom::Error when normalized_shape is empty or has a size below 1.
  explicit LayerNormImpl(LayerNormOptions options);
  void reset() override;
  // weight back to 1 and bias to 0 (when affine).
  void reset_parameters();
  // (*, normalized_shape) -> same shape.  Throws naming the layer and both
  // shapes when input's trailing dims are not normalized_shape.
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;

  LayerNormOptions options;
  Tensor weight;  // normalized_shape, or undefined without elementwise_affine
  Tensor bias;    // normalized_shape, or undefined
};
LOOM_MODULE(LayerNorm);

}  // namespace nn
}  // namespace loom
