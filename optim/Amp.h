// Apex-style opt levels (apex.amp.initialize) over AutocastGuard and
// GradScaler: one object that says how a training step runs.
//
//   amp::Amp amp = amp::initialize(*model, optimizer, "O1", kCPU);  // bfloat16
//   for (auto& batch : loader) {
//     amp.zero_grad();
//     Tensor loss;
//     {
//       auto region = amp.autocast();                  // O1: autocast
//       loss = criterion(model->forward(amp.input(batch.data)), batch.target);
//     }
//     amp.backward(loss);                              // scaled (O1, O2)
//     amp.step();                                      // skipped on inf/NaN
//   }
//
//   O0  float32 (a plain step)
//   O1  float32 weights, AutocastGuard around the forward, dynamic loss scaling
//   O2  the model in the low precision except batch norm, float32 master
//       weights in the optimizer (the model's 16-bit weights are copied from
//       them after every step), dynamic loss scaling; inputs cast by input()
//   O3  everything in the low precision (batch norm too), no master weights,
//       no loss scaling
// dtype: the low precision, bfloat16 on the CPU (the only one its autocast
// takes) and float16 or bfloat16 on CUDA.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/Autocast.h"
#include "nn/Module.h"
#include "optim/GradScaler.h"

namespace loom {
namespace amp {

class Amp {
 public:
  // An autocast region for the forward under O1 (nullptr otherwise).
  std::unique_ptr<AutocastGuard> autocast() const;
  // x in the model's dtype under O2/O3 (floating inputs only), else x.
  Tensor input(const Tensor& x) const;
  // loss.backward(), through the scaler under O1/O2.
  void backward(const Tensor& loss);
  // One optimizer step: O2 moves the model's gradients to the float32
  // masters first and the updated masters back into the model after; O1/O2
  // skip the step when a gradient is inf/NaN and update the scale.  Returns
  // whether the step ran.
  bool step();
  // Clears the gradients of the model and (O2) of the masters.
  void zero_grad();

  const std::string& opt_level() const { return opt_level_; }
  DType dtype() const { return dtype_; }
  GradScaler& scaler() { return scaler_; }

 private:
  friend Amp initialize(nn::Module&, optim::Optimizer&, const std::string&, DeviceType,
                        std::optional<DType>);
  Amp(nn::Module& model, optim::Optimizer& optimizer, std::string opt_level, DeviceType device,
      DType dtype, bool loss_scaling);

  nn::Module* model_;
  optim::Optimizer* optimizer_;
  std::string opt_level_;
  DeviceType device_;
  DType dtype_;
  GradScaler scaler_;
  // O2: (model parameter, its float32 master in the optimizer); a float32
  // model parameter (batch norm's) is its own master.
  std::vector<std::pair<Tensor, Tensor>> masters_;
};

// Converts `model` (and, for O2, the optimizer's parameters) for the opt
// level and returns how to run the steps.  Call before the first step, with
// the optimizer built over model.parameters().  Throws for an unknown level
// or dtype.
Amp initialize(nn::Module& model, optim::Optimizer& optimizer, const std::string& opt_level,
               DeviceType device = kCPU, std::optional<DType> dtype = std::nullopt);

}  // namespace amp
}  // namespace loom
