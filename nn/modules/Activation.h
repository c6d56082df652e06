// Parameter-free layers: ReLU, Identity, Flatten, Dropout.
#pragma once

#include "nn/Cloneable.h"
#include "nn/ModuleHolder.h"

namespace loom {
namespace nn {

class ReLUImpl : public Cloneable<ReLUImpl> {
 public:
  explicit ReLUImpl(bool inplace = false) : Cloneable("ReLU"), inplace_(inplace) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;

 private:
  bool inplace_;
};
LOOM_MODULE(ReLU);

class IdentityImpl : public Cloneable<IdentityImpl> {
 public:
  IdentityImpl() : Cloneable("Identity") {}
  void reset() override {}
  Tensor forward(const Tensor& input) override { return input; }
};
LOOM_MODULE(Identity);

struct FlattenOptions {
  FlattenOptions& start_dim(int64_t v) { start_dim_ = v; return *this; }
  FlattenOptions& end_dim(int64_t v) { end_dim_ = v; return *this; }
  int64_t start_dim_ = 1;
  int64_t end_dim_ = -1;
};

// Flattens dims start_dim..end_dim (default: all but the batch dim).
class FlattenImpl : public Cloneable<FlattenImpl> {
 public:
  explicit FlattenImpl(FlattenOptions options = {}) : Cloneable("Flatten"), options(options) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;
  FlattenOptions options;
};
LOOM_MODULE(Flatten);

// Zeroes elements with probability p in training mode (scaling the rest by
// 1/(1-p)); the identity in eval mode.
class DropoutImpl : public Cloneable<DropoutImpl> {
 public:
  explicit DropoutImpl(double p = 0.5);
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;
  double p;
};
LOOM_MODULE(Dropout);

}  // namespace nn
}  // namespace loom
