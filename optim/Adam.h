// optim::Adam and optim::AdamW (decoupled weight decay), following
// torch.optim (1.13) step for step, amsgrad included.
#pragma once

#include "optim/Optimizer.h"

namespace loom {
namespace optim {

struct AdamOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  AdamOptions& betas(double beta1, double beta2) { beta1_ = beta1; beta2_ = beta2; return *this; }
  AdamOptions& eps(double v) { eps_ = v; return *this; }
  AdamOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  AdamOptions& amsgrad(bool v) { amsgrad_ = v; return *this; }
  AdamOptions& maximize(bool v) { maximize_ = v; return *this; }
  Hyperparameters to_map(const char* name) const;
  double lr_;
  double beta1_ = 0.9;
  double beta2_ = 0.999;
  double eps_ = 1e-8;
  double weight_decay_ = 0;
  bool amsgrad_ = false;
  bool maximize_ = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = AdamOptions());
  Adam(std::vector<ParamGroup> groups, AdamOptions options = AdamOptions());
  void step() override;

 protected:
  Adam(std::vector<ParamGroup> groups, Hyperparameters defaults, std::string name, bool decoupled);

 private:
  bool decoupled_weight_decay_ = false;
};

// Adam with weight decay applied to the parameter directly (p *= 1 - lr * wd);
// default weight_decay 1e-2 as in PyTorch.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options = AdamOptions().weight_decay(1e-2));
  AdamW(std::vector<ParamGroup> groups, AdamOptions options = AdamOptions().weight_decay(1e-2));
};

}  // namespace optim
}  // namespace loom
