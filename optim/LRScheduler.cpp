#include "optim/LRScheduler.h"

#include <algorithm>
#include <cmath>

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"

namespace loom {
namespace optim {

// ---- LRScheduler ------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer, int64_t last_epoch, std::string name)
    : optimizer_(optimizer), last_epoch_(last_epoch), name_(std::move(name)) {
  LOOM_CHECK(last_epoch >= -1, name_, ": last_epoch must be -1 (a new schedule) or the epoch to ",
             "resume from (>= 0), got ", last_epoch);
  if (last_epoch == -1) return;
  const auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size(); ++i)
    LOOM_CHECK(groups[i].options.count("initial_lr") > 0, name_,
               ": param 'initial_lr' is not specified in param_groups[", i,
               "] when resuming an optimizer (last_epoch = ", last_epoch,
               "); load the optimizer's saved state_dict first, or pass last_epoch = -1 to start "
               "a new schedule");
}

void LRScheduler::initialize() {
  const bool resuming = last_epoch_ >= 0;
  for (auto& g : optimizer_.param_groups()) {
    if (!resuming) g.options.emplace("initial_lr", g.lr());
    base_lrs_.push_back(g.options.at("initial_lr"));
  }
  if (!resuming) {
    step();
    return;
  }
  // Resuming: the rates of epoch last_epoch + 1 come from the schedule
  // itself, not from whatever rate the optimizer holds.
  ++last_epoch_;
  set_lrs(closed_form_lr());
}

std::vector<double> LRScheduler::current_lrs() const {
  std::vector<double> out;
  for (const auto& g : optimizer_.param_groups()) out.push_back(g.lr());
  return out;
}

void LRScheduler::check_group_count(const char* what) const {
  const size_t groups = optimizer_.param_groups().size();
  LOOM_CHECK(groups == base_lrs_.size(), name_, what, ": the optimizer has ", groups,
             " parameter groups but the scheduler was built for ", base_lrs_.size(),
             "; build the scheduler after the last add_param_group");
}

void LRScheduler::set_lrs(const std::vector<double>& lrs) {
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].set_lr(lrs[i]);
  last_lr_ = lrs;
}

void LRScheduler::step() {
  check_group_count(".step");
  ++last_epoch_;
  set_lrs(compute_lr());
}

nn::OrderedDict<Tensor> LRScheduler::state_dict() const {
  nn::OrderedDict<Tensor> out;
  out.insert("last_epoch", scalar_tensor(last_epoch_, kInt64));
  const int64_t groups = static_cast<int64_t>(base_lrs_.size());
  out.insert("base_lrs", tensor<double>(base_lrs_, {groups}));
  out.insert("last_lr", tensor<double>(last_lr_, {groups}));
  save_options(out);
  return out;
}

void LRScheduler::load_state_dict(const nn::OrderedDict<Tensor>& state) {
  check_group_count(".load_state_dict");
  const int64_t last_epoch = read_int(state, "last_epoch");
  LOOM_CHECK(last_epoch >= 0, name_, ".load_state_dict: \"last_epoch\" must be >= 0, got ",
             last_epoch);
  const size_t groups = base_lrs_.size();
  std::vector<std::vector<double>> rates;
  for (const char* key : {"base_lrs", "last_lr"}) {
    const Tensor& t = read_vector(state, key);
    LOOM_CHECK(t.numel() == static_cast<int64_t>(groups), name_, ".load_state_dict: \"", key,
               "\" has ", t.numel(), " entries but the optimizer has ", groups,
               " parameter groups");
    rates.push_back(t.to_vector<double>());
  }
  load_options(state);  // checks its keys before adopting them
  last_epoch_ = last_epoch;
  base_lrs_ = rates[0];
  set_lrs(rates[1]);
}

namespace {
const Tensor& lookup(const nn::OrderedDict<Tensor>& state, const std::string& name,
                     const std::string& key) {
  const Tensor* t = state.find(key);
  LOOM_CHECK(t != nullptr && t->defined(), name, ".load_state_dict: missing key \"", key, "\"");
  return *t;
}
}  // namespace

double LRScheduler::read_double(const nn::OrderedDict<Tensor>& state,
                                const std::string& key) const {
  const Tensor& t = lookup(state, name_, key);
  LOOM_CHECK(t.dim() == 0, name_, ".load_state_dict: \"", key,
             "\" should hold one number (0-dim), got ", t.describe());
  return t.item<double>();
}

int64_t LRScheduler::read_int(const nn::OrderedDict<Tensor>& state, const std::string& key) const {
  const Tensor& t = lookup(state, name_, key);
  LOOM_CHECK(t.dim() == 0 && !t.is_floating_point(), name_, ".load_state_dict: \"", key,
             "\" should hold one integer (0-dim), got ", t.describe());
  return t.item<int64_t>();
}

const Tensor& LRScheduler::read_vector(const nn::OrderedDict<Tensor>& state,
                                       const std::string& key) const {
  const Tensor& t = lookup(state, name_, key);
  LOOM_CHECK(t.dim() == 1, name_, ".load_state_dict: \"", key, "\" should be 1-D, got ",
             t.describe());
  return t;
}

// ---- StepLR -----------------------------------------------------------------

namespace {
void check_step_size(int64_t step_size, const char* where) {
  LOOM_CHECK(step_size > 0, "StepLR", where, ": step_size must be positive, got ", step_size);
}
}  // namespace

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch, "StepLR"), step_size_(step_size), gamma_(gamma) {
  check_step_size(step_size, "");
  initialize();
}

std::vector<double> StepLR::compute_lr() {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

std::vector<double> StepLR::closed_form_lr() const {
  std::vector<double> lrs = base_lrs_;
  for (double& lr : lrs) lr *= std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_));
  return lrs;
}

void StepLR::save_options(nn::OrderedDict<Tensor>& state) const {
  state.insert("step_size", scalar_tensor(step_size_, kInt64));
  state.insert("gamma", scalar_tensor(gamma_, kFloat64));
}

void StepLR::load_options(const nn::OrderedDict<Tensor>& state) {
  const int64_t step_size = read_int(state, "step_size");
  const double gamma = read_double(state, "gamma");
  check_step_size(step_size, ".load_state_dict");
  step_size_ = step_size;
  gamma_ = gamma;
}

// ---- MultiStepLR ------------------------------------------------------------

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma,
                         int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch, "MultiStepLR"),
      milestones_(std::move(milestones)),
      gamma_(gamma) {
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

std::vector<double> MultiStepLR::closed_form_lr() const {
  // Milestones passed so far, repeats counted (bisect_right).
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                      milestones_.begin();
  std::vector<double> lrs = base_lrs_;
  for (double& lr : lrs) lr *= std::pow(gamma_, static_cast<double>(passed));
  return lrs;
}

void MultiStepLR::save_options(nn::OrderedDict<Tensor>& state) const {
  state.insert("milestones", tensor<int64_t>(milestones_, {static_cast<int64_t>(milestones_.size())}));
  state.insert("gamma", scalar_tensor(gamma_, kFloat64));
}

void MultiStepLR::load_options(const nn::OrderedDict<Tensor>& state) {
  const Tensor& m = read_vector(state, "milestones");
  LOOM_CHECK(!m.is_floating_point(), "MultiStepLR.load_state_dict: \"milestones\" should hold ",
             "integers, got ", m.describe());
  const double gamma = read_double(state, "gamma");
  milestones_ = m.to_vector<int64_t>();
  std::sort(milestones_.begin(), milestones_.end());
  gamma_ = gamma;
}

// ---- CosineAnnealingLR ------------------------------------------------------

namespace {
void check_t_max(int64_t t_max, const char* where) {
  LOOM_CHECK(t_max > 0, "CosineAnnealingLR", where, ": T_max must be positive, got ", t_max);
}
}  // namespace

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min,
                                     int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch, "CosineAnnealingLR"), t_max_(T_max), eta_min_(eta_min) {
  check_t_max(T_max, "");
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

std::vector<double> CosineAnnealingLR::closed_form_lr() const {
  // As PyTorch's first step of a resumed schedule (t * pi / T, in that order).
  const double t = static_cast<double>(last_epoch_), T = static_cast<double>(t_max_);
  std::vector<double> lrs = base_lrs_;
  for (double& lr : lrs) lr = eta_min_ + (lr - eta_min_) * (1 + std::cos(t * M_PI / T)) / 2;
  return lrs;
}

void CosineAnnealingLR::save_options(nn::OrderedDict<Tensor>& state) const {
  state.insert("T_max", scalar_tensor(t_max_, kInt64));
  state.insert("eta_min", scalar_tensor(eta_min_, kFloat64));
}

void CosineAnnealingLR::load_options(const nn::OrderedDict<Tensor>& state) {
  const int64_t t_max = read_int(state, "T_max");
  const double eta_min = read_double(state, "eta_min");
  check_t_max(t_max, ".load_state_dict");
  t_max_ = t_max;
  eta_min_ = eta_min;
}

// ---- LinearLR ---------------------------------------------------------------

namespace {
void check_linear(double start_factor, double end_factor, int64_t total_iters, const char* where) {
  LOOM_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR", where,
             ": start_factor must be in (0, 1], got ", start_factor);
  LOOM_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR", where,
             ": end_factor must be in [0, 1], got ", end_factor);
  LOOM_CHECK(total_iters > 0, "LinearLR", where, ": total_iters must be positive, got ",
             total_iters);
}
}  // namespace

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  check_linear(start_factor, end_factor, total_iters, "");
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

std::vector<double> LinearLR::closed_form_lr() const {
  const double t = static_cast<double>(std::min(total_iters_, last_epoch_));
  const double total = static_cast<double>(total_iters_);
  std::vector<double> lrs = base_lrs_;
  for (double& lr : lrs) lr *= start_factor_ + (end_factor_ - start_factor_) * t / total;
  return lrs;
}

void LinearLR::save_options(nn::OrderedDict<Tensor>& state) const {
  state.insert("start_factor", scalar_tensor(start_factor_, kFloat64));
  state.insert("end_factor", scalar_tensor(end_factor_, kFloat64));
  state.insert("total_iters", scalar_tensor(total_iters_, kInt64));
}

void LinearLR::load_options(const nn::OrderedDict<Tensor>& state) {
  const double start_factor = read_double(state, "start_factor");
  const double end_factor = read_double(state, "end_factor");
  const int64_t total_iters = read_int(state, "total_iters");
  check_linear(start_factor, end_factor, total_iters, ".load_state_dict");
  start_factor_ = start_factor;
  end_factor_ = end_factor;
  total_iters_ = total_iters;
}

}  // namespace optim
}  // namespace loom
