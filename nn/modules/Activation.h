// Parameter-free layers: the activations (ReLU and the others of
// torch.nn, each forwarding to its function in autograd/functions/
// Elementwise.h), Identity, Flatten, Dropout.
#pragma once

#include <string>

#include "autograd/functions/Elementwise.h"
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

// ---- activations with options (torch.nn's defaults) ------------------------------

struct LeakyReLUOptions {
  LeakyReLUOptions& negative_slope(double v) { negative_slope_ = v; return *this; }
  LeakyReLUOptions& inplace(bool v) { inplace_ = v; return *this; }
  double negative_slope_ = 0.01;
  bool inplace_ = false;
};
class LeakyReLUImpl : public Cloneable<LeakyReLUImpl> {
 public:
  explicit LeakyReLUImpl(LeakyReLUOptions options = {})
      : Cloneable("LeakyReLU"), options(options) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;
  LeakyReLUOptions options;
};
LOOM_MODULE(LeakyReLU);

struct ELUOptions {
  ELUOptions& alpha(double v) { alpha_ = v; return *this; }
  ELUOptions& inplace(bool v) { inplace_ = v; return *this; }
  double alpha_ = 1.0;
  bool inplace_ = false;
};
class ELUImpl : public Cloneable<ELUImpl> {
 public:
  explicit ELUImpl(ELUOptions options = {}) : Cloneable("ELU"), options(options) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;
  ELUOptions options;
};
LOOM_MODULE(ELU);

// approximate: "none" (the exact GELU) or "tanh"; anything else throws.
struct GELUOptions {
  GELUOptions& approximate(std::string v) { approximate_ = std::move(v); return *this; }
  std::string approximate_ = "none";
};
class GELUImpl : public Cloneable<GELUImpl> {
 public:
  explicit GELUImpl(GELUOptions options = {});
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;
  GELUOptions options;
};
LOOM_MODULE(GELU);

struct SoftplusOptions {
  SoftplusOptions& beta(double v) { beta_ = v; return *this; }
  SoftplusOptions& threshold(double v) { threshold_ = v; return *this; }
  double beta_ = 1.0;
  double threshold_ = 20.0;
};
class SoftplusImpl : public Cloneable<SoftplusImpl> {
 public:
  explicit SoftplusImpl(SoftplusOptions options = {}) : Cloneable("Softplus"), options(options) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& out) const override;
  SoftplusOptions options;
};
LOOM_MODULE(Softplus);

// ---- activations without options (or only `inplace`) -----------------------------

// A layer that applies fn(input, inplace), printed as "<Name>()".
template <typename Derived, Tensor (*Fn)(const Tensor&, bool)>
class InplaceActivation : public Cloneable<Derived> {
 public:
  InplaceActivation(const char* name, bool inplace) : Cloneable<Derived>(name), inplace_(inplace) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override { return Fn(input, inplace_); }
  void pretty_print(std::ostream& out) const override {
    out << this->type_name() << "(" << (inplace_ ? "inplace=true" : "") << ")";
  }

 private:
  bool inplace_;
};

// min(max(x, 0), 6).
class ReLU6Impl : public InplaceActivation<ReLU6Impl, &relu6> {
 public:
  explicit ReLU6Impl(bool inplace = false) : InplaceActivation("ReLU6", inplace) {}
};
LOOM_MODULE(ReLU6);

// x * sigmoid(x).
class SiLUImpl : public InplaceActivation<SiLUImpl, &silu> {
 public:
  explicit SiLUImpl(bool inplace = false) : InplaceActivation("SiLU", inplace) {}
};
LOOM_MODULE(SiLU);

class HardswishImpl : public InplaceActivation<HardswishImpl, &hardswish> {
 public:
  explicit HardswishImpl(bool inplace = false) : InplaceActivation("Hardswish", inplace) {}
};
LOOM_MODULE(Hardswish);

class HardsigmoidImpl : public InplaceActivation<HardsigmoidImpl, &hardsigmoid> {
 public:
  explicit HardsigmoidImpl(bool inplace = false) : InplaceActivation("Hardsigmoid", inplace) {}
};
LOOM_MODULE(Hardsigmoid);

// x * tanh(softplus(x)).
class MishImpl : public InplaceActivation<MishImpl, &mish> {
 public:
  explicit MishImpl(bool inplace = false) : InplaceActivation("Mish", inplace) {}
};
LOOM_MODULE(Mish);

class SigmoidImpl : public Cloneable<SigmoidImpl> {
 public:
  SigmoidImpl() : Cloneable("Sigmoid") {}
  void reset() override {}
  Tensor forward(const Tensor& input) override { return sigmoid(input); }
  void pretty_print(std::ostream& out) const override { out << "Sigmoid()"; }
};
LOOM_MODULE(Sigmoid);

class TanhImpl : public Cloneable<TanhImpl> {
 public:
  TanhImpl() : Cloneable("Tanh") {}
  void reset() override {}
  Tensor forward(const Tensor& input) override { return tanh(input); }
  void pretty_print(std::ostream& out) const override { out << "Tanh()"; }
};
LOOM_MODULE(Tanh);

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
