// The scripted GradScaler run shared by tests/optim/grad_scaler_test (against
// PyTorch's GradScaler running the same script, tools/pyloom/
// grad_scaler_reference.py) and tests/tensor/cuda_half_test (the run on a GPU
// against the CPU's): three weights, SGD(lr 0.1), init_scale 1024,
// growth_interval 3, loss (w * c).sum() with c[1] inf at steps 2, 3 and 9
// and NaN at step 14, unscale_ before step on even steps.
#pragma once

#include <cmath>
#include <vector>

#include "loom.h"

namespace loom {
namespace testing {

struct ScalerStep {
  double scale;      // after update()
  int64_t tracker;   // growth tracker after update()
  bool ran;          // step() stepped
  std::vector<float> w;
};

inline std::vector<ScalerStep> run_scaler_script(Device device, int steps = 20) {
  Tensor w = tensor<float>({0.5f, -1.0f, 2.0f}).to(device).detach().requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  amp::GradScalerOptions options;
  options.init_scale = 1024.0;
  options.growth_interval = 3;
  amp::GradScaler scaler(options);
  std::vector<ScalerStep> out;
  for (int step = 0; step < steps; ++step) {
    std::vector<float> c = {1.0f, -2.0f, 3.0f};
    if (step == 2 || step == 3 || step == 9) c[1] = INFINITY;
    if (step == 14) c[1] = NAN;
    opt.zero_grad();
    scaler.scale((w * tensor<float>(c).to(device)).sum()).backward();
    if (step % 2 == 0) scaler.unscale_(opt);
    const bool ran = scaler.step(opt);
    scaler.update();
    out.push_back({scaler.get_scale(), scaler.get_growth_tracker(), ran, w.cpu().to_vector<float>()});
  }
  return out;
}

}  // namespace testing
}  // namespace loom
