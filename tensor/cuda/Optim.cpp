// CUDA kernels for the fused optimizer updates (native/Optim.h): the group's
// pointer lists handed to the multi-tensor launchers of tensor/cuda/Optim.h
// (kernels in Optim.cu), with the scalars computed in double exactly as the
// CPU loop computes them.
#include <cmath>
#include <memory>

#include "tensor/CudaGraph.h"
#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Optim.h"
#include "tensor/native/Optim.h"

namespace loom {
namespace cuda {
namespace {

void sgd_step_kernel(const std::vector<native::SGDParam>& group, const native::SGDHyper& h) {
  const bool use_mom = h.momentum != 0;
  std::vector<void*> ps, bufs;
  std::vector<const void*> gs;
  std::vector<int64_t> numels;
  std::unique_ptr<bool[]> first(new bool[group.size()]);
  for (size_t j = 0; j < group.size(); ++j) {
    const native::SGDParam& s = group[j];
    ps.push_back(s.param.data_ptr());
    gs.push_back(s.grad.data_ptr());
    bufs.push_back(use_mom ? s.momentum_buffer.data_ptr() : nullptr);
    numels.push_back(s.param.numel());
    first[j] = s.first;
  }
  SgdConstants c;
  c.lr = h.lr;
  c.weight_decay = h.weight_decay;
  c.momentum = h.momentum;
  c.one_minus_dampening = 1 - h.dampening;
  c.use_weight_decay = h.weight_decay != 0;
  c.use_momentum = use_mom;
  c.nesterov = h.nesterov;
  c.maximize = h.maximize;
  const Tensor& p0 = group.front().param;
  const int device = p0.device().index;
  sgd_step(p0.dtype(), static_cast<int>(group.size()), ps.data(), gs.data(), bufs.data(),
           first.get(), numels.data(), c, device, current_stream_handle(device));
}

void adam_step_kernel(const std::vector<native::AdamParam>& group, const native::AdamHyper& h) {
  const char* who = h.decoupled ? "AdamW" : "Adam";
  check_not_capturing(group.front().param.device().index, who,
                      "its step count and bias corrections live on the host, so every replay "
                      "would repeat one step; step outside the graph, or use SGD");
  std::vector<void*> ps, ms, vs, vmaxs;
  std::vector<const void*> gs;
  std::vector<int64_t> numels;
  std::vector<double> neg_step, bc2;
  for (const native::AdamParam& s : group) {
    ps.push_back(s.param.data_ptr());
    gs.push_back(s.grad.data_ptr());
    ms.push_back(s.exp_avg.data_ptr());
    vs.push_back(s.exp_avg_sq.data_ptr());
    vmaxs.push_back(h.amsgrad ? s.max_exp_avg_sq.data_ptr() : nullptr);
    numels.push_back(s.param.numel());
    // As the CPU kernel computes them for this parameter's step.
    const double bias_correction1 = 1 - std::pow(h.beta1, s.step);
    const double bias_correction2 = 1 - std::pow(h.beta2, s.step);
    neg_step.push_back(-(h.lr / bias_correction1));
    bc2.push_back(std::sqrt(bias_correction2));
  }
  AdamConstants c;
  c.beta1 = h.beta1;
  c.beta2 = h.beta2;
  c.one_minus_beta1 = 1 - h.beta1;
  c.one_minus_beta2 = 1 - h.beta2;
  c.weight_decay = h.weight_decay;
  c.decay = 1 - h.lr * h.weight_decay;
  c.eps = h.eps;
  c.use_weight_decay = h.weight_decay != 0;
  c.decoupled = h.decoupled;
  c.maximize = h.maximize;
  const Tensor& p0 = group.front().param;
  const int device = p0.device().index;
  adam_step(p0.dtype(), static_cast<int>(group.size()), ps.data(), gs.data(), ms.data(),
            vs.data(), vmaxs.data(), neg_step.data(), bc2.data(), numels.data(), c, device,
            current_stream_handle(device));
}

}  // namespace

static const native::RegisterKernel reg_sgd_step(native::sgd_step_stub, kCUDA, &sgd_step_kernel);
static const native::RegisterKernel reg_adam_step(native::adam_step_stub, kCUDA,
                                                  &adam_step_kernel);

}  // namespace cuda
}  // namespace loom
