#include "optim/SGD.h"

#include "autograd/GradMode.h"
#include "tensor/native/Optim.h"
#include "tensor/Factory.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace optim {

Hyperparameters SGDOptions::to_map() const {
  LOOM_CHECK(lr_ >= 0, "SGD: invalid learning rate: ", lr_);
  LOOM_CHECK(momentum_ >= 0, "SGD: invalid momentum value: ", momentum_);
  LOOM_CHECK(weight_decay_ >= 0, "SGD: invalid weight_decay value: ", weight_decay_);
  LOOM_CHECK(!nesterov_ || (momentum_ > 0 && dampening_ == 0),
             "SGD: Nesterov momentum requires a momentum and zero dampening");
  return {{"lr", lr_},
          {"momentum", momentum_},
          {"dampening", dampening_},
          {"weight_decay", weight_decay_},
          {"nesterov", nesterov_ ? 1.0 : 0.0},
          {"maximize", maximize_ ? 1.0 : 0.0}};
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer({ParamGroup(std::move(params))}, options.to_map(), "SGD") {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer(std::move(groups), options.to_map(), "SGD") {}

void SGD::step() {
  autograd::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    native::SGDHyper h;
    h.lr = option(group, "lr");
    h.momentum = option(group, "momentum");
    h.dampening = option(group, "dampening");
    h.weight_decay = option(group, "weight_decay");
    h.nesterov = option(group, "nesterov") != 0;
    h.maximize = option(group, "maximize") != 0;
    std::vector<native::SGDParam> batch;  // one multi-tensor launch per CUDA device and dtype
    for (Tensor& p : group.params) {
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      Tensor buf;
      bool first = false;
      if (h.momentum != 0) {
        ParamState& s = state(p);
        auto it = s.find("momentum_buffer");
        if (it == s.end()) {
          buf = empty(p.sizes(), TensorOptions(p.dtype()).device(p.device()));
          s["momentum_buffer"] = buf;
          first = true;
        } else {
          buf = it->second;
        }
      }
      batch.push_back({p, grad, buf, first});
    }
    native::sgd_update_many(batch, h);
  }
}

}  // namespace optim
}  // namespace loom
