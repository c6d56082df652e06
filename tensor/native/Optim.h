// Fused optimizer updates: one pass over each parameter does what PyTorch's
// SGD and Adam/AdamW do with several tensor ops, in the same order and
// precision (hyperparameters rounded to the parameter's dtype as PyTorch's
// scalar arguments are), so trajectories match.  The optimizers of optim/
// call these; checks, grouping and version bumps are here, the arithmetic in
// the backends: tensor/cpu/Optim.cpp (a loop per parameter, compiled without
// FMA contraction) and tensor/cuda/Optim.cpp (one multi-tensor launch per
// group and up to 48 parameters, queued on the device's current stream
// without waiting; same operations, one rounding each, so a CUDA trajectory
// equals the CPU's).
#pragma once

#include <vector>

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

struct SGDHyper {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};

// One parameter of an SGD update: p -= lr * direction; `momentum_buffer`
// (same shape, or undefined without momentum) is initialised from the first
// direction when `first`.
struct SGDParam {
  Tensor param, grad, momentum_buffer;
  bool first = false;
};

struct AdamHyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, step = 0;
  bool amsgrad = false, maximize = false, decoupled = false;
};

// One parameter of an Adam/AdamW update; max_exp_avg_sq is undefined unless
// amsgrad; `step` is this parameter's step count, already incremented.
struct AdamParam {
  Tensor param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq;
  double step = 0;
};

// Updates every parameter of the list (parameters may sit on several devices
// and dtypes: one kernel call per (device, dtype) group).  Throws before
// touching anything for a non-contiguous parameter, a gradient of another
// shape or device, or a state tensor that does not match its parameter.
void sgd_update_many(const std::vector<SGDParam>& params, const SGDHyper& h);
void adam_update_many(const std::vector<AdamParam>& params, const AdamHyper& h);
// One parameter (h.step is its step count for Adam).
void sgd_update(const Tensor& p, const Tensor& grad, const Tensor& buf, bool first,
                const SGDHyper& h);
void adam_update(const Tensor& p, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamHyper& h);

// ---- kernels (one slot per device type) -----------------------------------------
// A group of checked parameters of one device and floating dtype, gradients
// already contiguous in the parameter's dtype.  Versions are bumped by the
// caller.
using SgdStepKernel = void (*)(const std::vector<SGDParam>& group, const SGDHyper& h);
using AdamStepKernel = void (*)(const std::vector<AdamParam>& group, const AdamHyper& h);

extern DispatchStub<SgdStepKernel> sgd_step_stub;
extern DispatchStub<AdamStepKernel> adam_step_stub;

}  // namespace native
}  // namespace loom
