// Learning-rate schedulers with torch.optim.lr_scheduler (1.13) semantics:
// construction performs a step (to epoch 0 for a new schedule), and each
// step() advances one epoch using PyTorch's recursive ("chainable") formulas,
// so learning rates match PyTorch's to the last bit.
//
// Resuming a schedule, two ways, as in PyTorch:
//  - state_dict() / load_state_dict(): build the optimizer and the scheduler
//    as at the start, then load both saved states.  Continues bit for bit.
//  - the last_epoch constructor argument: a scheduler whose last_epoch() was
//    k is resumed by constructing with last_epoch = k - 1 over an optimizer
//    whose groups hold "initial_lr" (a restored optimizer state_dict does);
//    construction steps to epoch k and sets its rates from the closed form
//    (PyTorch's _get_closed_form_lr).  PyTorch 1.13 does that for
//    CosineAnnealingLR only and applies StepLR's and LinearLR's recursive
//    factor to the restored rate, which counts a decay twice; here every
//    scheduler resumes on its schedule (to rounding: the closed form and the
//    recursion may differ in the last bit).
#pragma once

#include <string>
#include <vector>

#include "nn/OrderedDict.h"
#include "optim/Optimizer.h"

namespace loom {
namespace optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  // Advances one epoch and writes the new rates into the optimizer's groups.
  // Throws if the optimizer gained or lost parameter groups since the
  // scheduler was built.
  void step();
  // The rates set by the last step, one per group.
  std::vector<double> get_last_lr() const { return last_lr_; }
  // The epoch of the last step (0 after constructing a new schedule).
  int64_t last_epoch() const { return last_epoch_; }
  // Each group's "initial_lr", the rate the schedule is relative to.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  const std::string& name() const { return name_; }

  // Everything needed to resume, as tensors (so it saves with nn::save):
  // "last_epoch" (0-dim int64), "base_lrs" and "last_lr" (float64, one per
  // parameter group), and the scheduler's own hyperparameters ("step_size",
  // "gamma", ...: 0-dim float64 or int64; MultiStepLR's "milestones" is 1-D
  // int64).
  nn::OrderedDict<Tensor> state_dict() const;
  // Restores state_dict(), hyperparameters included (as PyTorch does), and
  // sets each group's lr to the saved last_lr, so it does not matter whether
  // the optimizer's state was loaded before or after this scheduler was
  // built (PyTorch 1.13 leaves the rate construction wrote, e.g.
  // start_factor * lr for LinearLR, when the optimizer was loaded first).
  // Throws naming the key when one is missing, has the wrong shape, or holds
  // an invalid value, or when the number of groups differs; a state that
  // throws changes nothing.
  void load_state_dict(const nn::OrderedDict<Tensor>& state);

 protected:
  // last_epoch -1 starts a new schedule: each group's "initial_lr" is set to
  // its lr unless present.  last_epoch >= 0 resumes one: every group must
  // already hold "initial_lr" (throws naming the group otherwise, as PyTorch
  // does).  Throws for last_epoch < -1.  Nothing changes until initialize().
  LRScheduler(Optimizer& optimizer, int64_t last_epoch, std::string name);

  // The rates for last_epoch_ from the groups' current rates (PyTorch's
  // chainable get_lr).
  virtual std::vector<double> compute_lr() = 0;
  // The rates for last_epoch_ from base_lrs_ alone.
  virtual std::vector<double> closed_form_lr() const = 0;
  // The scheduler's own hyperparameters, added to a state_dict.
  virtual void save_options(nn::OrderedDict<Tensor>& state) const = 0;
  // Reads and checks them from a state_dict, then adopts them; must change
  // nothing when it throws.
  virtual void load_options(const nn::OrderedDict<Tensor>& state) = 0;

  // Call at the end of a derived constructor, after checking its arguments:
  // records initial_lr and performs the constructor's step.
  void initialize();
  std::vector<double> current_lrs() const;
  // A 0-dim number from a state_dict; throws naming the key.
  double read_double(const nn::OrderedDict<Tensor>& state, const std::string& key) const;
  int64_t read_int(const nn::OrderedDict<Tensor>& state, const std::string& key) const;
  // A 1-D tensor from a state_dict; throws naming the key.
  const Tensor& read_vector(const nn::OrderedDict<Tensor>& state, const std::string& key) const;

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_;

 private:
  void check_group_count(const char* what) const;
  void set_lrs(const std::vector<double>& lrs);

  std::string name_;
  std::vector<double> last_lr_;
};

// lr *= gamma every step_size epochs.  Throws for step_size <= 0.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1, int64_t last_epoch = -1);

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> closed_form_lr() const override;
  void save_options(nn::OrderedDict<Tensor>& state) const override;
  void load_options(const nn::OrderedDict<Tensor>& state) override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr *= gamma at each milestone epoch (repeated milestones multiply).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1,
              int64_t last_epoch = -1);

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> closed_form_lr() const override;
  void save_options(nn::OrderedDict<Tensor>& state) const override;
  void load_options(const nn::OrderedDict<Tensor>& state) override;

 private:
  std::vector<int64_t> milestones_;  // sorted, repeats kept
  double gamma_;
};

// Cosine annealing from the initial lr to eta_min over T_max epochs (and back
// up over the next T_max, as PyTorch's recursion does).  Throws for T_max <= 0.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0,
                    int64_t last_epoch = -1);

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> closed_form_lr() const override;
  void save_options(nn::OrderedDict<Tensor>& state) const override;
  void load_options(const nn::OrderedDict<Tensor>& state) override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// Linear warm-up: the factor goes from start_factor to end_factor over
// total_iters epochs.  Throws for start_factor outside (0, 1], end_factor
// outside [0, 1] or total_iters <= 0.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5, int64_t last_epoch = -1);

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> closed_form_lr() const override;
  void save_options(nn::OrderedDict<Tensor>& state) const override;
  void load_options(const nn::OrderedDict<Tensor>& state) override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

}  // namespace optim
}  // namespace loom
