#include "optim/Amp.h"

#include <map>

#include "autograd/GradMode.h"
#include "nn/modules/BatchNorm.h"

namespace loom {
namespace amp {
namespace {

bool is_batch_norm(const nn::Module& m) { return dynamic_cast<const nn::BatchNormBase*>(&m); }

// The whole model in `dtype`, batch norm modules kept float32 (bit for bit)
// when keep_batch_norm.
void convert_model(nn::Module& model, DType dtype, bool keep_batch_norm) {
  std::vector<std::pair<nn::Module*, nn::StateDict>> kept;
  if (keep_batch_norm) {
    for (const auto& [name, m] : model.named_modules()) {
      if (!is_batch_norm(*m)) continue;
      nn::StateDict copy;
      for (const auto& [key, t] : m->state_dict()) copy.insert(key, t.clone().detach());
      kept.emplace_back(m.get(), std::move(copy));
    }
  }
  model.to(dtype);
  for (auto& [m, state] : kept) {
    m->to(kFloat32);
    m->load_state_dict(state);
  }
}

}  // namespace

Amp::Amp(nn::Module& model, optim::Optimizer& optimizer, std::string opt_level, DeviceType device,
         DType dtype, bool loss_scaling)
    : model_(&model),
      optimizer_(&optimizer),
      opt_level_(std::move(opt_level)),
      device_(device),
      dtype_(dtype),
      scaler_([&] {
        GradScalerOptions o;
        o.enabled = loss_scaling;
        return o;
      }()) {}

Amp initialize(nn::Module& model, optim::Optimizer& optimizer, const std::string& opt_level,
               DeviceType device, std::optional<DType> dtype) {
  LOOM_CHECK(opt_level == "O0" || opt_level == "O1" || opt_level == "O2" || opt_level == "O3",
             "amp::initialize: opt_level must be O0, O1, O2 or O3 (the letter O), got \"",
             opt_level, "\"");
  const DType low = dtype.value_or(device == DeviceType::kCUDA ? kFloat16 : kBFloat16);
  LOOM_CHECK(is_reduced_float(low), "amp::initialize: dtype must be float16 or bfloat16, got ",
             dtype_name(low));
  LOOM_CHECK(device == DeviceType::kCUDA || low == kBFloat16,
             "amp::initialize: the CPU trains in bfloat16, got ", dtype_name(low));
  const bool scaling = opt_level == "O1" || opt_level == "O2";
  Amp amp(model, optimizer, opt_level, device, low, scaling);
  if (opt_level == "O2" || opt_level == "O3") {
    // Masters: the optimizer's float32 parameters, taken before the model
    // converts (conversion keeps each parameter's handle, so the optimizer
    // would otherwise see 16-bit tensors).
    std::map<const TensorImpl*, Tensor> master_of;
    if (opt_level == "O2") {
      autograd::NoGradGuard no_grad;
      for (const Tensor& p : model.parameters())
        master_of[p.impl()] = p.clone().detach().requires_grad_();
    }
    convert_model(model, low, /*keep_batch_norm=*/opt_level == "O2");
    if (opt_level == "O2") {
      for (optim::ParamGroup& group : optimizer.param_groups())
        for (Tensor& p : group.params) {
          auto it = master_of.find(p.impl());
          LOOM_CHECK(it != master_of.end(),
                     "amp::initialize: the optimizer holds a parameter that is not the model's (",
                     p.describe(), "); build it over model.parameters()");
          if (p.dtype() == kFloat32) continue;  // batch norm: its own master
          amp.masters_.emplace_back(p, it->second);
          p = it->second;
        }
    }
  }
  return amp;
}

std::unique_ptr<AutocastGuard> Amp::autocast() const {
  if (opt_level_ != "O1") return nullptr;
  return std::make_unique<AutocastGuard>(device_, dtype_);
}

Tensor Amp::input(const Tensor& x) const {
  if ((opt_level_ == "O2" || opt_level_ == "O3") && x.defined() && x.is_floating_point())
    return x.to(dtype_);
  return x;
}

void Amp::backward(const Tensor& loss) { scaler_.scale(loss).backward(); }

bool Amp::step() {
  {
    autograd::NoGradGuard no_grad;
    for (auto& [model_param, master] : masters_) {
      const Tensor g = model_param.grad();
      master.set_grad(g.defined() ? g.to(kFloat32) : Tensor());
    }
  }
  const bool ran = scaler_.step(*optimizer_);
  scaler_.update();
  if (ran) {
    autograd::NoGradGuard no_grad;
    for (auto& [model_param, master] : masters_) model_param.copy_(master);
  }
  return ran;
}

void Amp::zero_grad() {
  model_->zero_grad();
  optimizer_->zero_grad();
}

}  // namespace amp
}  // namespace loom
