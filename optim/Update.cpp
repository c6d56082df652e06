#include "optim/Update.h"

#include <cmath>
#include <memory>
#include <string>

#include "tensor/CudaGraph.h"
#include "tensor/CudaRuntime.h"
#include "tensor/Parallel.h"
#include "tensor/cuda/Optim.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace optim {
namespace {

void check_param(const Tensor& p, const Tensor& grad, const char* who) {
  LOOM_CHECK(p.is_contiguous(), who, ": parameters must be contiguous, got ", p.describe());
  LOOM_CHECK(grad.sizes() == p.sizes(), who, ": gradient ", grad.describe(),
             " does not match its parameter ", p.describe());
  LOOM_CHECK(grad.device() == p.device(), who, ": gradient on ", grad.device(),
             " but parameter on ", p.device());
  if (p.is_cuda()) cuda::check_device(p.device().index, who);
}

// Throws unless the state buffer t matches its parameter p.
void check_state(const Tensor& p, const Tensor& t, const char* name, const char* who) {
  LOOM_CHECK(t.defined() && t.sizes() == p.sizes() && t.dtype() == p.dtype() &&
                 t.device() == p.device() && t.is_contiguous(),
             who, ": state '", name, "' ", t.defined() ? t.describe() : std::string("undefined"),
             " does not match its parameter ", p.describe());
}

// The gradient as a contiguous tensor of the parameter's dtype.
Tensor dense_grad(const Tensor& p, const Tensor& grad) {
  return native::contiguous(native::to(grad, p.device(), p.dtype()));
}

}  // namespace

void sgd_update(const Tensor& p, const Tensor& grad_in, const Tensor& buf, bool first,
                const SGDHyper& h) {
  if (p.defined() && p.is_cuda()) return sgd_update_many({{p, grad_in, buf, first}}, h);
  check_param(p, grad_in, "SGD");
  const Tensor grad = dense_grad(p, grad_in);
  dispatch_floating(p.dtype(), "SGD", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* w = p.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    T* m = buf.defined() ? buf.data_ptr<T>() : nullptr;
    const T lr = static_cast<T>(h.lr), wd = static_cast<T>(h.weight_decay);
    const T mom = static_cast<T>(h.momentum), damp = static_cast<T>(1 - h.dampening);
    const bool use_wd = h.weight_decay != 0, use_mom = h.momentum != 0;
    parallel_for(0, p.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T d = h.maximize ? -g[i] : g[i];
        if (use_wd) d = d + wd * w[i];
        if (use_mom) {
          if (first) {
            m[i] = d;
          } else {
            const T decayed = m[i] * mom;
            m[i] = decayed + damp * d;
          }
          d = h.nesterov ? d + mom * m[i] : m[i];
        }
        w[i] = w[i] - lr * d;
      }
    });
  });
  p.bump_version();
  if (buf.defined()) buf.bump_version();
}

void adam_update(const Tensor& p, const Tensor& grad_in, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamHyper& h) {
  const char* who = h.decoupled ? "AdamW" : "Adam";
  if (p.defined() && p.is_cuda())
    return adam_update_many({{p, grad_in, exp_avg, exp_avg_sq, max_exp_avg_sq, h.step}}, h);
  check_param(p, grad_in, who);
  const Tensor grad = dense_grad(p, grad_in);
  const double bias_correction1 = 1 - std::pow(h.beta1, h.step);
  const double bias_correction2 = 1 - std::pow(h.beta2, h.step);
  const double step_size = h.lr / bias_correction1;
  const double bc2_sqrt = std::sqrt(bias_correction2);
  dispatch_floating(p.dtype(), who, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* w = p.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    T* m = exp_avg.data_ptr<T>();
    T* v = exp_avg_sq.data_ptr<T>();
    T* vmax = max_exp_avg_sq.defined() ? max_exp_avg_sq.data_ptr<T>() : nullptr;
    const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2);
    const T one_minus_b1 = static_cast<T>(1 - h.beta1), one_minus_b2 = static_cast<T>(1 - h.beta2);
    const T wd = static_cast<T>(h.weight_decay);
    const T decay = static_cast<T>(1 - h.lr * h.weight_decay);
    const T eps = static_cast<T>(h.eps), bc2 = static_cast<T>(bc2_sqrt);
    const T neg_step = static_cast<T>(-step_size);
    const bool use_wd = h.weight_decay != 0;
    parallel_for(0, p.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T gi = h.maximize ? -g[i] : g[i];
        if (use_wd) {
          if (h.decoupled) w[i] = w[i] * decay;
          else gi = gi + wd * w[i];
        }
        const T m_decayed = m[i] * b1;
        m[i] = m_decayed + one_minus_b1 * gi;
        const T v_decayed = v[i] * b2;
        v[i] = v_decayed + one_minus_b2 * (gi * gi);
        T second = v[i];
        if (vmax) {
          vmax[i] = vmax[i] > v[i] ? vmax[i] : v[i];
          second = vmax[i];
        }
        const T denom = std::sqrt(second) / bc2 + eps;
        w[i] = w[i] + neg_step * (m[i] / denom);
      }
    });
  });
  p.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
  if (max_exp_avg_sq.defined()) max_exp_avg_sq.bump_version();
}

// ---- CUDA: multi-tensor launches ------------------------------------------------------

namespace {

// Indices of `items` grouped by (device, dtype) of their parameter, CPU
// parameters left out; calls fn(group) for each group in first-seen order.
template <typename Item, typename Fn>
void for_each_cuda_group(const std::vector<Item>& items, const Fn& fn) {
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < items.size(); ++i) {
    const Tensor& p = items[i].param;
    if (!p.is_cuda()) continue;
    bool placed = false;
    for (auto& g : groups) {
      const Tensor& q = items[g.front()].param;
      if (q.device() == p.device() && q.dtype() == p.dtype()) {
        g.push_back(i);
        placed = true;
        break;
      }
    }
    if (!placed) groups.push_back({i});
  }
  for (const auto& g : groups) fn(g);
}

}  // namespace

void sgd_update_many(const std::vector<SGDParam>& params, const SGDHyper& h) {
  for (const SGDParam& s : params) {
    LOOM_CHECK(s.param.defined(), "SGD: undefined parameter");
    if (s.param.is_cpu()) sgd_update(s.param, s.grad, s.momentum_buffer, s.first, h);
  }
  const bool use_mom = h.momentum != 0;
  for_each_cuda_group(params, [&](const std::vector<size_t>& group) {
    std::vector<Tensor> grads;  // keeps converted gradients alive until queued
    std::vector<void*> ps, bufs;
    std::vector<const void*> gs;
    std::vector<int64_t> numels;
    std::unique_ptr<bool[]> first(new bool[group.size()]);
    for (size_t j = 0; j < group.size(); ++j) {
      const SGDParam& s = params[group[j]];
      check_param(s.param, s.grad, "SGD");
      if (use_mom) check_state(s.param, s.momentum_buffer, "momentum_buffer", "SGD");
      grads.push_back(dense_grad(s.param, s.grad));
      ps.push_back(s.param.data_ptr());
      gs.push_back(grads.back().data_ptr());
      bufs.push_back(use_mom ? s.momentum_buffer.data_ptr() : nullptr);
      numels.push_back(s.param.numel());
      first[j] = s.first;
    }
    // The scalars as the CPU loop computes them.
    cuda::SgdConstants c;
    c.lr = h.lr;
    c.weight_decay = h.weight_decay;
    c.momentum = h.momentum;
    c.one_minus_dampening = 1 - h.dampening;
    c.use_weight_decay = h.weight_decay != 0;
    c.use_momentum = use_mom;
    c.nesterov = h.nesterov;
    c.maximize = h.maximize;
    const Tensor& p0 = params[group.front()].param;
    const int device = p0.device().index;
    cuda::sgd_step(p0.dtype(), static_cast<int>(group.size()), ps.data(), gs.data(), bufs.data(),
                   first.get(), numels.data(), c, device, cuda::current_stream_handle(device));
    for (size_t i : group) {
      params[i].param.bump_version();
      if (use_mom) params[i].momentum_buffer.bump_version();
    }
  });
}

void adam_update_many(const std::vector<AdamParam>& params, const AdamHyper& h) {
  const char* who = h.decoupled ? "AdamW" : "Adam";
  for (const AdamParam& s : params) {
    LOOM_CHECK(s.param.defined(), who, ": undefined parameter");
    if (s.param.is_cpu()) {
      AdamHyper hp = h;
      hp.step = s.step;
      adam_update(s.param, s.grad, s.exp_avg, s.exp_avg_sq, s.max_exp_avg_sq, hp);
    }
  }
  for_each_cuda_group(params, [&](const std::vector<size_t>& group) {
    cuda::check_not_capturing(params[group[0]].param.device().index, who,
                              "its step count and bias corrections live on the host, so every "
                              "replay would repeat one step; step outside the graph, or use SGD");
    std::vector<Tensor> grads;
    std::vector<void*> ps, ms, vs, vmaxs;
    std::vector<const void*> gs;
    std::vector<int64_t> numels;
    std::vector<double> neg_step, bc2;
    for (size_t i : group) {
      const AdamParam& s = params[i];
      check_param(s.param, s.grad, who);
      check_state(s.param, s.exp_avg, "exp_avg", who);
      check_state(s.param, s.exp_avg_sq, "exp_avg_sq", who);
      if (h.amsgrad) check_state(s.param, s.max_exp_avg_sq, "max_exp_avg_sq", who);
      grads.push_back(dense_grad(s.param, s.grad));
      ps.push_back(s.param.data_ptr());
      gs.push_back(grads.back().data_ptr());
      ms.push_back(s.exp_avg.data_ptr());
      vs.push_back(s.exp_avg_sq.data_ptr());
      vmaxs.push_back(h.amsgrad ? s.max_exp_avg_sq.data_ptr() : nullptr);
      numels.push_back(s.param.numel());
      // As adam_update computes them for this parameter's step.
      const double bias_correction1 = 1 - std::pow(h.beta1, s.step);
      const double bias_correction2 = 1 - std::pow(h.beta2, s.step);
      neg_step.push_back(-(h.lr / bias_correction1));
      bc2.push_back(std::sqrt(bias_correction2));
    }
    cuda::AdamConstants c;
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
    const Tensor& p0 = params[group.front()].param;
    const int device = p0.device().index;
    cuda::adam_step(p0.dtype(), static_cast<int>(group.size()), ps.data(), gs.data(), ms.data(),
                    vs.data(), vmaxs.data(), neg_step.data(), bc2.data(), numels.data(), c,
                    device, cuda::current_stream_handle(device));
    for (size_t i : group) {
      params[i].param.bump_version();
      params[i].exp_avg.bump_version();
      params[i].exp_avg_sq.bump_version();
      if (h.amsgrad) params[i].max_exp_avg_sq.bump_version();
    }
  });
}

}  // namespace optim
}  // namespace loom
