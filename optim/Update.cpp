#include "optim/Update.h"

#include <cmath>

#include "tensor/Parallel.h"
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
  LOOM_CHECK(p.is_cpu(), who, " is not implemented for CUDA yet (parameters on ", p.device(),
             "); keep the model on the CPU");
}

// The gradient as a contiguous tensor of the parameter's dtype.
Tensor dense_grad(const Tensor& p, const Tensor& grad) {
  return native::contiguous(native::to(grad, p.device(), p.dtype()));
}

}  // namespace

void sgd_update(const Tensor& p, const Tensor& grad_in, const Tensor& buf, bool first,
                const SGDHyper& h) {
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

}  // namespace optim
}  // namespace loom
