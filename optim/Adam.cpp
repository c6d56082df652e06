#include "optim/Adam.h"

#include "autograd/GradMode.h"
#include "tensor/native/Optim.h"
#include "tensor/Factory.h"

namespace loom {
namespace optim {

Hyperparameters AdamOptions::to_map(const char* name) const {
  LOOM_CHECK(lr_ >= 0, name, ": invalid learning rate: ", lr_);
  LOOM_CHECK(eps_ >= 0, name, ": invalid epsilon value: ", eps_);
  LOOM_CHECK(beta1_ >= 0 && beta1_ < 1, name, ": invalid beta parameter at index 0: ", beta1_);
  LOOM_CHECK(beta2_ >= 0 && beta2_ < 1, name, ": invalid beta parameter at index 1: ", beta2_);
  LOOM_CHECK(weight_decay_ >= 0, name, ": invalid weight_decay value: ", weight_decay_);
  return {{"lr", lr_},
          {"beta1", beta1_},
          {"beta2", beta2_},
          {"eps", eps_},
          {"weight_decay", weight_decay_},
          {"amsgrad", amsgrad_ ? 1.0 : 0.0},
          {"maximize", maximize_ ? 1.0 : 0.0}};
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam({ParamGroup(std::move(params))}, options.to_map("Adam"), "Adam", false) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options)
    : Adam(std::move(groups), options.to_map("Adam"), "Adam", false) {}

Adam::Adam(std::vector<ParamGroup> groups, Hyperparameters defaults, std::string name,
           bool decoupled)
    : Optimizer(std::move(groups), std::move(defaults), std::move(name)),
      decoupled_weight_decay_(decoupled) {}

void Adam::step() {
  autograd::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    native::AdamHyper h;
    h.lr = option(group, "lr");
    h.beta1 = option(group, "beta1");
    h.beta2 = option(group, "beta2");
    h.eps = option(group, "eps");
    h.weight_decay = option(group, "weight_decay");
    h.amsgrad = option(group, "amsgrad") != 0;
    h.maximize = option(group, "maximize") != 0;
    h.decoupled = decoupled_weight_decay_;
    std::vector<native::AdamParam> batch;  // one multi-tensor launch per CUDA device and dtype
    for (Tensor& p : group.params) {
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& s = state(p);
      if (s.empty()) {
        const TensorOptions like = TensorOptions(p.dtype()).device(p.device());
        s["step"] = zeros({}, kFloat32);
        s["exp_avg"] = zeros(p.sizes(), like);
        s["exp_avg_sq"] = zeros(p.sizes(), like);
        if (h.amsgrad) s["max_exp_avg_sq"] = zeros(p.sizes(), like);
      }
      float& step = *s["step"].data_ptr<float>();
      step += 1;
      batch.push_back({p, grad, s["exp_avg"], s["exp_avg_sq"],
                       h.amsgrad ? s["max_exp_avg_sq"] : Tensor(), static_cast<double>(step)});
    }
    native::adam_update_many(batch, h);
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options)
    : Adam({ParamGroup(std::move(params))}, options.to_map("AdamW"), "AdamW", true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions options)
    : Adam(std::move(groups), options.to_map("AdamW"), "AdamW", true) {}

}  // namespace optim
}  // namespace loom
