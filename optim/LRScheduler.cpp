#include "optim/LRScheduler.h"

#include <algorithm>
#include <cmath>

namespace loom {
namespace optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (auto& g : optimizer_.param_groups()) {
    g.options.emplace("initial_lr", g.lr());
    base_lrs_.push_back(g.options.at("initial_lr"));
  }
}

void LRScheduler::initialize() { step(); }

std::vector<double> LRScheduler::current_lrs() const {
  std::vector<double> out;
  for (const auto& g : optimizer_.param_groups()) out.push_back(g.lr());
  return out;
}

void LRScheduler::step() {
  ++last_epoch_;
  const std::vector<double> lrs = compute_lr();
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size() && i < lrs.size(); ++i) groups[i].set_lr(lrs[i]);
  last_lr_ = lrs;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  LOOM_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initialize();
}

std::vector<double> StepLR::compute_lr() {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initialize();
}

std::vector<double> MultiStepLR::compute_lr() {
  std::vector<double> lrs = current_lrs();
  const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (hits == 0) return lrs;
  for (double& lr : lrs) lr *= std::pow(gamma_, static_cast<double>(hits));
  return lrs;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  LOOM_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initialize();
}

std::vector<double> CosineAnnealingLR::compute_lr() {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) return lrs;
  const double t = static_cast<double>(last_epoch_), T = static_cast<double>(t_max_);
  if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0) {
    for (size_t i = 0; i < lrs.size(); ++i)
      lrs[i] = lrs[i] + (base_lrs_[i] - eta_min_) * (1 - std::cos(M_PI / T)) / 2;
    return lrs;
  }
  for (double& lr : lrs)
    lr = (1 + std::cos(M_PI * t / T)) / (1 + std::cos(M_PI * (t - 1) / T)) * (lr - eta_min_) +
         eta_min_;
  return lrs;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  LOOM_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR: start_factor must be in (0, 1], got ",
             start_factor);
  LOOM_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: end_factor must be in [0, 1], got ",
             end_factor);
  initialize();
}

std::vector<double> LinearLR::compute_lr() {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr *= start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double t = static_cast<double>(last_epoch_ - 1);
  for (double& lr : lrs)
    lr *= 1.0 + (end_factor_ - start_factor_) /
                    (total_iters_ * start_factor_ + t * (end_factor_ - start_factor_));
  return lrs;
}

}  // namespace optim
}  // namespace loom
