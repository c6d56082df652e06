// optim::SGD with momentum, dampening, Nesterov and weight decay, following
// torch.optim.SGD (1.13) step for step.
#pragma once

#include "optim/Optimizer.h"

namespace loom {
namespace optim {

struct SGDOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& dampening(double v) { dampening_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
  SGDOptions& maximize(bool v) { maximize_ = v; return *this; }
  Hyperparameters to_map() const;
  double lr_;
  double momentum_ = 0;
  double dampening_ = 0;
  double weight_decay_ = 0;
  bool nesterov_ = false;
  bool maximize_ = false;
};

class SGD : public Optimizer {
 public:
  // Throws for negative lr/momentum/weight decay and for Nesterov without
  // momentum or with dampening, as PyTorch does.
  SGD(std::vector<Tensor> params, SGDOptions options);
  SGD(std::vector<ParamGroup> groups, SGDOptions options);
  void step() override;
};

}  // namespace optim
}  // namespace loom
