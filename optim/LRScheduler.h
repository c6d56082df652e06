// Learning-rate schedulers with torch.optim.lr_scheduler (1.13) semantics:
// construction performs step 0 (recording each group's initial_lr), and each
// step() advances one epoch using PyTorch's recursive ("chainable") formulas,
// so learning rates match PyTorch's to the last bit.
#pragma once

#include <vector>

#include "optim/Optimizer.h"

namespace loom {
namespace optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  // Advances one epoch and writes the new rates into the optimizer's groups.
  void step();
  // The rates set by the last step, one per group.
  std::vector<double> get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }

 protected:
  // The next rates from the current ones (group lr), for last_epoch_.
  virtual std::vector<double> compute_lr() = 0;
  // Call at the end of a derived constructor: performs step 0.
  void initialize();
  std::vector<double> current_lrs() const;

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;

 private:
  std::vector<double> last_lr_;
};

// lr *= gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> compute_lr() override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr *= gamma at each milestone epoch (repeated milestones multiply).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  std::vector<double> compute_lr() override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

// Cosine annealing from the initial lr to eta_min over T_max epochs.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  std::vector<double> compute_lr() override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// Linear warm-up: factor goes from start_factor to end_factor over total_iters.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);

 protected:
  std::vector<double> compute_lr() override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

}  // namespace optim
}  // namespace loom
