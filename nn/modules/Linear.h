// nn::Linear: y = x W^T + b.  weight (out, in), bias (out); PyTorch's default
// init (kaiming_uniform with a = sqrt(5), bias uniform(+-1/sqrt(in))).
#pragma once

#include "nn/Cloneable.h"
#include "nn/ModuleHolder.h"

namespace loom {
namespace nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  LinearOptions& bias(bool b) { bias_ = b; return *this; }
  int64_t in_features_;
  int64_t out_features_;
  bool bias_ = true;
};

class LinearImpl : public Cloneable<LinearImpl> {
 public:
  LinearImpl(int64_t in_features, int64_t out_features)
      : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(LinearOptions options);
  void reset() override;
  // (..., in_features) -> (..., out_features).  Throws naming the layer and
  // both shapes when the last dim is not in_features.
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;

  LinearOptions options;
  Tensor weight;  // (out, in)
  Tensor bias;    // (out) or undefined
};
LOOM_MODULE(Linear);

}  // namespace nn
}  // namespace loom
