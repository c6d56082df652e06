// Fused per-parameter update kernels: one pass over each parameter does what
// PyTorch's optimizer does with several tensor ops, in the same order and
// precision (hyperparameters rounded to the parameter's dtype as PyTorch's
// scalar arguments are), so trajectories match.
//
// Parameters on a CUDA device run tensor/cuda/Optim.cu's kernels, which do
// the same operations in the same order with one rounding each, so a CUDA
// trajectory equals the CPU's.  The *_many forms update a list of parameters:
// on CUDA one multi-tensor launch per (device, dtype) and up to 48
// parameters, queued on the device's current stream without waiting; CPU
// parameters in the list take the per-parameter CPU loop.
#pragma once

#include <vector>

#include "tensor/Tensor.h"

namespace loom {
namespace optim {

struct SGDHyper {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};

// p -= lr * direction; `buf` (same shape, or undefined without momentum) is
// the momentum buffer, initialised from the first direction when `first`.
void sgd_update(const Tensor& p, const Tensor& grad, const Tensor& buf, bool first,
                const SGDHyper& h);

// One parameter of an sgd_update_many call (arguments as sgd_update's).
struct SGDParam {
  Tensor param, grad, momentum_buffer;
  bool first = false;
};
void sgd_update_many(const std::vector<SGDParam>& params, const SGDHyper& h);

struct AdamHyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, step = 0;
  bool amsgrad = false, maximize = false, decoupled = false;
};

// One Adam/AdamW step with h.step already incremented; max_exp_avg_sq is
// undefined unless amsgrad.
void adam_update(const Tensor& p, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamHyper& h);

// One parameter of an adam_update_many call (arguments as adam_update's);
// `step` is this parameter's step count (h.step is ignored).
struct AdamParam {
  Tensor param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq;
  double step = 0;
};
void adam_update_many(const std::vector<AdamParam>& params, const AdamHyper& h);

}  // namespace optim
}  // namespace loom
