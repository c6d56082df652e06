#include "optim/GradScaler.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "autograd/GradMode.h"
#include "autograd/functions/Functions.h"
#include "tensor/Factory.h"
#include "tensor/native/AmpUnscale.h"

namespace loom {
namespace amp {
namespace {

Tensor scalar_of(double v) { return scalar_tensor(v, TensorOptions(kFloat64)); }

double read(const nn::OrderedDict<Tensor>& state, const std::string& key) {
  LOOM_CHECK(state.contains(key), "GradScaler.load_state_dict: missing \"", key, "\"");
  const Tensor& t = state.at(key);
  LOOM_CHECK(t.defined() && t.numel() == 1, "GradScaler.load_state_dict: \"", key,
             "\" must hold one number, got ", t.defined() ? t.describe() : "an undefined tensor");
  return t.item<double>();
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  LOOM_CHECK(options_.init_scale > 0, "GradScaler: init_scale must be positive, got ",
             options_.init_scale);
  LOOM_CHECK(options_.growth_factor > 1.0, "GradScaler: growth_factor should be > 1, got ",
             options_.growth_factor);
  LOOM_CHECK(options_.backoff_factor < 1.0 && options_.backoff_factor > 0,
             "GradScaler: backoff_factor should be in (0, 1), got ", options_.backoff_factor);
  LOOM_CHECK(options_.growth_interval > 0, "GradScaler: growth_interval should be > 0, got ",
             options_.growth_interval);
}

void GradScaler::check_initialized(const char* what) const {
  LOOM_CHECK(scale_.defined(), "GradScaler.", what,
             ": the scale is not initialized; call scale(loss) first (this iteration's "
             "backward should have used the scaled loss)");
}

Tensor GradScaler::scale(const Tensor& outputs) {
  LOOM_CHECK(outputs.defined() && outputs.is_floating_point(),
             "GradScaler.scale: expected a floating-point tensor (the loss), got ",
             outputs.defined() ? outputs.describe() : "an undefined tensor");
  if (!options_.enabled) return outputs;
  if (!scale_.defined()) {
    const TensorOptions on = TensorOptions(kFloat32).device(outputs.device());
    scale_ = full({1}, options_.init_scale, on);
    growth_tracker_ =
        full({1}, init_growth_tracker_, TensorOptions(kInt32).device(outputs.device()));
  }
  return outputs * scale_.to(outputs.device());
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  check_initialized("unscale_");
  PerOptimizer& state = per_optimizer_[&optimizer];
  LOOM_CHECK(state.stage != Stage::kUnscaled,
             "GradScaler.unscale_: already called on this optimizer since the last update()");
  LOOM_CHECK(state.stage != Stage::kStepped,
             "GradScaler.unscale_: called after step() (call it between backward and step)");
  autograd::NoGradGuard no_grad;
  // 1 / scale in double, then float32, as PyTorch.
  const Tensor inv_scale = rdiv(scale_.to(kFloat64), 1.0).to(kFloat32);
  // The gradients by device, in first-seen order: one fused check-and-unscale
  // pass each (PyTorch's _amp_foreach_non_finite_check_and_unscale_), its
  // inf/NaN flag kept on the device until step() reads it.
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  for (const optim::ParamGroup& group : optimizer.param_groups()) {
    for (const Tensor& p : group.params) {
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      LOOM_CHECK(g.dtype() != kFloat16,
                 "GradScaler.unscale_: attempting to unscale float16 gradients (of ",
                 p.describe(), "); keep float32 master parameters (amp::initialize O2) or use "
                 "bfloat16");
      auto it = std::find_if(by_device.begin(), by_device.end(),
                             [&](const auto& entry) { return entry.first == g.device(); });
      if (it == by_device.end()) it = by_device.insert(by_device.end(), {g.device(), {}});
      it->second.push_back(g);
    }
  }
  for (const auto& [device, grads] : by_device) {
    Tensor found = zeros({1}, TensorOptions(kFloat32).device(device));
    native::amp_unscale_(grads, found, inv_scale.to(device));
    state.found_inf[device] = found;
  }
  state.stage = Stage::kUnscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  check_initialized("step");
  {
    const PerOptimizer& state = per_optimizer_[&optimizer];
    LOOM_CHECK(state.stage != Stage::kStepped,
               "GradScaler.step: already called on this optimizer since the last update()");
  }
  if (per_optimizer_[&optimizer].stage == Stage::kReady) unscale_(optimizer);
  PerOptimizer& state = per_optimizer_[&optimizer];
  LOOM_CHECK(!state.found_inf.empty(),
             "GradScaler.step: no inf checks were recorded for this optimizer (no parameter "
             "has a gradient: was backward called on the scaled loss?)");
  double found = 0;
  for (const auto& [device, flag] : state.found_inf) found += flag.item<double>();
  const bool run = found == 0;
  if (run) optimizer.step();
  state.stage = Stage::kStepped;
  return run;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  check_initialized("update");
  autograd::NoGradGuard no_grad;
  if (new_scale) {
    LOOM_CHECK(*new_scale > 0, "GradScaler.update: new_scale must be positive, got ", *new_scale);
    scale_.fill_(*new_scale);
  } else {
    Tensor found;
    for (const auto& [opt, state] : per_optimizer_)
      for (const auto& [device, flag] : state.found_inf) {
        const Tensor here = flag.to(scale_.device());
        found = found.defined() ? found + here : here;
      }
    LOOM_CHECK(found.defined(),
               "GradScaler.update: no inf checks were recorded prior to update() (call "
               "step(optimizer) or unscale_(optimizer) first)");
    // PyTorch's _amp_update_scale_, as device tensor ops (no host read):
    // an overflow backs off and resets the tracker; growth_interval clean
    // steps in a row grow the scale (when the result is finite) and reset it.
    const Tensor overflow = found.gt(0);
    const Tensor clean_steps = growth_tracker_ + 1;
    const Tensor due = clean_steps.eq(options_.growth_interval);
    const Tensor grown = scale_ * options_.growth_factor;
    const Tensor grown_finite = (grown - grown).eq(0);
    const Tensor next_scale =
        where(overflow, scale_ * options_.backoff_factor,
              where(due * grown_finite, grown, scale_));  // bool * bool: and
    const Tensor next_tracker =
        where(maximum(overflow, due), zeros_like(clean_steps), clean_steps);  // bool max: or
    scale_.copy_(next_scale);
    growth_tracker_.copy_(next_tracker);
  }
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? scale_.item<double>() : options_.init_scale;
}

int64_t GradScaler::get_growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>()
                                   : static_cast<int64_t>(init_growth_tracker_);
}

nn::OrderedDict<Tensor> GradScaler::state_dict() const {
  nn::OrderedDict<Tensor> out;
  if (!options_.enabled) return out;
  out.insert("scale", scalar_of(get_scale()));
  out.insert("growth_factor", scalar_of(options_.growth_factor));
  out.insert("backoff_factor", scalar_of(options_.backoff_factor));
  out.insert("growth_interval", scalar_of(static_cast<double>(options_.growth_interval)));
  out.insert("_growth_tracker", scalar_of(static_cast<double>(get_growth_tracker())));
  return out;
}

void GradScaler::load_state_dict(const nn::OrderedDict<Tensor>& state) {
  LOOM_CHECK(options_.enabled, "GradScaler.load_state_dict: this GradScaler is disabled");
  LOOM_CHECK(state.size() > 0, "GradScaler.load_state_dict: the state dict is empty, possibly "
             "because it was saved from a disabled GradScaler");
  options_.init_scale = read(state, "scale");
  options_.growth_factor = read(state, "growth_factor");
  options_.backoff_factor = read(state, "backoff_factor");
  options_.growth_interval = static_cast<int64_t>(read(state, "growth_interval"));
  init_growth_tracker_ = read(state, "_growth_tracker");
  if (scale_.defined()) scale_.fill_(options_.init_scale);
  if (growth_tracker_.defined()) growth_tracker_.fill_(init_growth_tracker_);
}

}  // namespace amp
}  // namespace loom
