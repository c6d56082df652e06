// optim::Optimizer: parameter groups, per-parameter state, zero_grad, step,
// and state_dict for exact resumption.
//
// Hyperparameters live per group as named numbers ("lr", "momentum", ...), so
// schedulers and checkpoints treat every optimizer alike; each optimizer's
// Options struct (SGDOptions(0.01).momentum(0.9)) fills them.  Steps run
// under NoGradGuard and follow PyTorch 1.13's update rules operation for
// operation, so trajectories match.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/OrderedDict.h"
#include "tensor/Tensor.h"

namespace loom {
namespace optim {

using Hyperparameters = std::map<std::string, double>;

struct ParamGroup {
  std::vector<Tensor> params;
  Hyperparameters options;  // filled from the optimizer's defaults when empty

  ParamGroup(std::vector<Tensor> params, Hyperparameters options = {})
      : params(std::move(params)), options(std::move(options)) {}
  double lr() const { return options.at("lr"); }
  void set_lr(double lr) { options["lr"] = lr; }
};

// Tensors an optimizer keeps for one parameter ("momentum_buffer", "exp_avg").
using ParamState = std::map<std::string, Tensor>;

class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, Hyperparameters defaults, std::string name);
  virtual ~Optimizer() = default;

  // Applies one update to every parameter that has a gradient.
  virtual void step() = 0;
  // Clears gradients: to undefined (set_to_none, PyTorch 2's default) or zeros.
  void zero_grad(bool set_to_none = true);
  // Adds a group; missing hyperparameters come from the defaults.  Throws if a
  // parameter already belongs to another group.
  void add_param_group(ParamGroup group);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const Hyperparameters& defaults() const { return defaults_; }
  const std::string& name() const { return name_; }

  // State of a parameter (created empty on first use).
  ParamState& state(const Tensor& param);
  bool has_state(const Tensor& param) const;

  // Everything needed to resume: per-parameter state as
  // "state.<index>.<name>" (index counts parameters over all groups in order)
  // and hyperparameters as 0-dim float64 "param_groups.<g>.<name>".
  nn::OrderedDict<Tensor> state_dict() const;
  // Restores from state_dict(); throws naming the key when groups, parameter
  // counts or shapes do not match.
  void load_state_dict(const nn::OrderedDict<Tensor>& state);

 protected:
  // Hyperparameter of a group, with a readable error when missing.
  double option(const ParamGroup& group, const std::string& key) const;

 private:
  std::vector<ParamGroup> groups_;
  Hyperparameters defaults_;
  std::string name_;
  std::map<const TensorImpl*, ParamState> state_;
};

}  // namespace optim
}  // namespace loom
