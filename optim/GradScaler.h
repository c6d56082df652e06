// GradScaler: dynamic loss scaling for float16 training, with PyTorch's
// algorithm and defaults (torch.cuda.amp.GradScaler).
//
//   amp::GradScaler scaler;
//   for (auto& batch : loader) {
//     optimizer.zero_grad();
//     Tensor loss;
//     {
//       amp::AutocastGuard autocast(kCUDA);
//       loss = cross_entropy(model->forward(batch.data), batch.target);
//     }
//     scaler.scale(loss).backward();   // gradients scaled by S
//     scaler.step(optimizer);          // unscales; skips the step on inf/NaN
//     scaler.update();                 // S /= 2 after an overflow, S *= 2 after
//   }                                  // growth_interval clean steps
//
// The scale and the growth tracker are tensors on the loss's device, and the
// inf/NaN check of unscale_ is a device tensor too: nothing waits for the
// device until step() reads whether to skip (one read per optimizer).
// unscale_(optimizer) may be called once between backward and step (to clip
// gradients); a second call before update() is an error, as in PyTorch.
#pragma once

#include <map>
#include <optional>

#include "nn/OrderedDict.h"
#include "optim/Optimizer.h"

namespace loom {
namespace amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;  // false: scale() and unscale_() do nothing, step() steps
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // outputs * scale (a float32 tensor of shape [1] on outputs' device,
  // created on the first call).
  Tensor scale(const Tensor& outputs);
  // Divides the gradients of `optimizer`'s parameters by the scale in place
  // and records whether any is inf or NaN.  Once per optimizer per update().
  void unscale_(optim::Optimizer& optimizer);
  // Unscales (unless unscale_ was called), then runs optimizer.step() unless
  // a gradient was inf/NaN.  Returns whether the step ran.
  bool step(optim::Optimizer& optimizer);
  // Backs the scale off after a skipped step, grows it after growth_interval
  // clean ones; or sets it to new_scale.  Ends the iteration for every
  // optimizer.
  void update(std::optional<double> new_scale = std::nullopt);

  bool is_enabled() const { return options_.enabled; }
  // The current scale (reads the device), init_scale before the first scale().
  double get_scale() const;
  int64_t get_growth_tracker() const;
  const GradScalerOptions& options() const { return options_; }

  // "scale", "growth_factor", "backoff_factor", "growth_interval",
  // "_growth_tracker" (PyTorch's keys) as 0-dim float64 tensors; empty when
  // disabled.
  nn::OrderedDict<Tensor> state_dict() const;
  void load_state_dict(const nn::OrderedDict<Tensor>& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    std::map<Device, Tensor> found_inf;  // float32 [1] per device: 1 when inf/NaN seen
  };

  void check_initialized(const char* what) const;

  GradScalerOptions options_;
  Tensor scale_;           // float32 [1]
  Tensor growth_tracker_;  // int32 [1]: consecutive clean steps
  double init_growth_tracker_ = 0;
  std::map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace amp
}  // namespace loom
