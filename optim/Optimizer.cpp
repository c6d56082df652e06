#include "optim/Optimizer.h"

#include <set>

#include "autograd/GradMode.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups, Hyperparameters defaults, std::string name)
    : defaults_(std::move(defaults)), name_(std::move(name)) {
  LOOM_CHECK(!groups.empty(), name_, ": optimizer got an empty parameter list");
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  LOOM_CHECK(!group.params.empty(), name_, ": a parameter group has no parameters");
  std::set<const TensorImpl*> seen;
  for (const auto& g : groups_)
    for (const auto& p : g.params) seen.insert(p.impl());
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    LOOM_CHECK(p.defined(), name_, ": parameter ", i, " of the group is undefined");
    LOOM_CHECK(p.is_leaf(), name_, ": can't optimize a non-leaf tensor ", p.describe());
    LOOM_CHECK(p.is_floating_point(), name_, ": can only optimize floating tensors, got ",
               p.describe());
    LOOM_CHECK(seen.insert(p.impl()).second, name_,
               ": some parameters appear in more than one parameter group");
  }
  for (const auto& [key, value] : defaults_) group.options.emplace(key, value);
  groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  autograd::NoGradGuard no_grad;
  for (auto& g : groups_)
    for (auto& p : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) p.set_grad(Tensor());
      else native::fill_(grad, 0);
    }
}

ParamState& Optimizer::state(const Tensor& param) { return state_[param.impl()]; }

bool Optimizer::has_state(const Tensor& param) const { return state_.count(param.impl()) > 0; }

double Optimizer::option(const ParamGroup& group, const std::string& key) const {
  auto it = group.options.find(key);
  LOOM_CHECK(it != group.options.end(), name_, ": parameter group has no option \"", key, "\"");
  return it->second;
}

nn::OrderedDict<Tensor> Optimizer::state_dict() const {
  nn::OrderedDict<Tensor> out;
  int64_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const auto& [key, value] : groups_[g].options)
      out.insert("param_groups." + std::to_string(g) + "." + key, scalar_tensor(value, kFloat64));
    out.insert("param_groups." + std::to_string(g) + ".num_params",
               scalar_tensor(static_cast<int64_t>(groups_[g].params.size()), kInt64));
    for (const auto& p : groups_[g].params) {
      auto it = state_.find(p.impl());
      if (it != state_.end())
        for (const auto& [name, t] : it->second)
          out.insert("state." + std::to_string(index) + "." + name, t);
      ++index;
    }
  }
  return out;
}

void Optimizer::load_state_dict(const nn::OrderedDict<Tensor>& state) {
  // Check the layout first so a bad file changes nothing.
  int64_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    const Tensor* count = state.find(prefix + "num_params");
    LOOM_CHECK(count != nullptr, name_, ".load_state_dict: missing key \"", prefix,
               "num_params\" (the saved optimizer has fewer parameter groups)");
    LOOM_CHECK(count->item<int64_t>() == static_cast<int64_t>(groups_[g].params.size()), name_,
               ".load_state_dict: group ", g, " has ", groups_[g].params.size(),
               " parameters but the saved state has ", count->item<int64_t>());
    index += static_cast<int64_t>(groups_[g].params.size());
  }
  LOOM_CHECK(state.find("param_groups." + std::to_string(groups_.size()) + ".num_params") == nullptr,
             name_, ".load_state_dict: the saved optimizer has more parameter groups than this one (",
             groups_.size(), ")");
  std::vector<const Tensor*> params;
  for (const auto& g : groups_)
    for (const auto& p : g.params) params.push_back(&p);
  for (const auto& [key, t] : state) {
    if (key.rfind("state.", 0) != 0) continue;
    const size_t dot = key.find('.', 6);
    LOOM_CHECK(dot != std::string::npos && dot > 6, name_, ".load_state_dict: malformed key \"",
               key, "\"");
    const std::string digits = key.substr(6, dot - 6);
    LOOM_CHECK(digits.find_first_not_of("0123456789") == std::string::npos, name_,
               ".load_state_dict: malformed key \"", key, "\"");
    const int64_t i = std::stoll(digits);
    LOOM_CHECK(i < index, name_, ".load_state_dict: key \"", key, "\" names parameter ", i,
               " but there are ", index);
    LOOM_CHECK(t.dim() == 0 || t.sizes() == params[i]->sizes(), name_, ".load_state_dict: \"",
               key, "\" has shape ", shape_str(t.sizes()), " but parameter ", i, " has ",
               shape_str(params[i]->sizes()));
  }

  autograd::NoGradGuard no_grad;
  state_.clear();
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    for (const auto& [key, t] : state)
      if (key.rfind(prefix, 0) == 0 && key != prefix + "num_params")
        groups_[g].options[key.substr(prefix.size())] = t.item<double>();
  }
  for (const auto& [key, t] : state) {
    if (key.rfind("state.", 0) != 0) continue;
    const size_t dot = key.find('.', 6);
    const int64_t i = std::stoll(key.substr(6, dot - 6));
    const Tensor& p = *params[i];
    // State lives where its parameter lives; scalars (step) stay as saved.
    Tensor value = t.dim() == 0 ? native::clone(t) : native::to(t, p.device(), p.dtype());
    if (value.is_same(t)) value = native::clone(t);
    state_[p.impl()][key.substr(dot + 1)] = value;
  }
}

}  // namespace optim
}  // namespace loom
