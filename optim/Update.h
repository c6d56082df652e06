// Fused per-parameter update kernels: one pass over each parameter does what
// PyTorch's optimizer does with several tensor ops, in the same order and
// precision (hyperparameters rounded to the parameter's dtype as PyTorch's
// scalar arguments are), so trajectories match.
#pragma once

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

struct AdamHyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, step = 0;
  bool amsgrad = false, maximize = false, decoupled = false;
};

// One Adam/AdamW step with h.step already incremented; max_exp_avg_sq is
// undefined unless amsgrad.
void adam_update(const Tensor& p, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamHyper& h);

}  // namespace optim
}  // namespace loom
