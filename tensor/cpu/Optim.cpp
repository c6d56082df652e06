// CPU kernels for the fused optimizer updates (native/Optim.h): a loop per
// parameter, split over the intra-op threads.  PyTorch's CPU kernels round
// every multiply, so this file is compiled with -ffp-contract=off (see
// tensor/BUILD: no multiply-add is fused into an FMA) and trajectories match
// PyTorch's bit for bit.
#include <cmath>
#include <type_traits>

#include "tensor/Parallel.h"
#include "tensor/native/Optim.h"

namespace loom {
namespace cpu {
namespace {

// One SGD update over [b, e) with the flags as template arguments, so the
// loop has no branches and vectorises (one instantiation per combination);
// each element rounds exactly as the scalar code would (no contraction in
// this file).  m is null without momentum.
template <typename T, bool kMaximize, bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_update(T* w, const T* g, T* m, int64_t b, int64_t e, T lr, T wd, T mom, T damp) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) {
    T d = kMaximize ? -g[i] : g[i];
    if constexpr (kDecay) d = d + wd * w[i];
    if constexpr (kMomentum) {
      T next;
      if constexpr (kFirst) {
        next = d;
      } else {
        const T decayed = m[i] * mom;
        next = decayed + damp * d;
      }
      m[i] = next;
      d = kNesterov ? d + mom * next : next;
    }
    w[i] = w[i] - lr * d;
  }
}

// f(std::integral_constant<bool, flag>) for a run-time flag.
template <typename F>
void with_flag(bool flag, const F& f) {
  if (flag) f(std::true_type{});
  else f(std::false_type{});
}

void sgd_step_kernel(const std::vector<native::SGDParam>& group, const native::SGDHyper& h) {
  for (const native::SGDParam& s : group) {
    dispatch_floating(s.param.dtype(), "SGD", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* w = s.param.data_ptr<T>();
      const T* g = s.grad.data_ptr<T>();
      T* m = s.momentum_buffer.defined() ? s.momentum_buffer.data_ptr<T>() : nullptr;
      const T lr = static_cast<T>(h.lr), wd = static_cast<T>(h.weight_decay);
      const T mom = static_cast<T>(h.momentum), damp = static_cast<T>(1 - h.dampening);
      with_flag(h.maximize, [&](auto maximize) {
        with_flag(h.weight_decay != 0, [&](auto decay) {
          with_flag(h.momentum != 0, [&](auto momentum) {
            with_flag(s.first, [&](auto first) {
              with_flag(h.nesterov, [&](auto nesterov) {
                parallel_for(0, s.param.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
                  sgd_update<T, decltype(maximize)::value, decltype(decay)::value,
                             decltype(momentum)::value, decltype(first)::value,
                             decltype(nesterov)::value>(w, g, m, b, e, lr, wd, mom, damp);
                });
              });
            });
          });
        });
      });
    });
  }
}

void adam_step_kernel(const std::vector<native::AdamParam>& group, const native::AdamHyper& h) {
  const char* who = h.decoupled ? "AdamW" : "Adam";
  for (const native::AdamParam& s : group) {
    const double bias_correction1 = 1 - std::pow(h.beta1, s.step);
    const double bias_correction2 = 1 - std::pow(h.beta2, s.step);
    const double step_size = h.lr / bias_correction1;
    const double bc2_sqrt = std::sqrt(bias_correction2);
    dispatch_floating(s.param.dtype(), who, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* w = s.param.data_ptr<T>();
      const T* g = s.grad.data_ptr<T>();
      T* m = s.exp_avg.data_ptr<T>();
      T* v = s.exp_avg_sq.data_ptr<T>();
      T* vmax = s.max_exp_avg_sq.defined() ? s.max_exp_avg_sq.data_ptr<T>() : nullptr;
      const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2);
      const T one_minus_b1 = static_cast<T>(1 - h.beta1);
      const T one_minus_b2 = static_cast<T>(1 - h.beta2);
      const T wd = static_cast<T>(h.weight_decay);
      const T decay = static_cast<T>(1 - h.lr * h.weight_decay);
      const T eps = static_cast<T>(h.eps), bc2 = static_cast<T>(bc2_sqrt);
      const T neg_step = static_cast<T>(-step_size);
      const bool use_wd = h.weight_decay != 0;
      parallel_for(0, s.param.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
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
  }
}

}  // namespace

static const native::RegisterKernel reg_sgd_step(native::sgd_step_stub, kCPU, &sgd_step_kernel);
static const native::RegisterKernel reg_adam_step(native::adam_step_stub, kCPU,
                                                  &adam_step_kernel);

}  // namespace cpu
}  // namespace loom
