// CPU loss kernels: nll, fused cross_entropy (log_softmax + nll + label
// smoothing, forward and backward), squared error.
//
// Cross entropy never materialises log-probabilities: the forward keeps one
// logsumexp per sample, and the backward recomputes p = exp(x - lse) while
// writing the gradient, one pass over the logits each way.  Totals are summed
// per fixed block of samples and then in block order, so a loss value does
// not depend on how many threads ran.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/cpu/FastExp.h"
#include "tensor/native/Loss.h"

namespace loom {
namespace cpu {

// Sums of a class loss over all elements, in double.
struct LossTotals {
  double loss = 0;    // sum of the per-element losses
  double weight = 0;  // sum of w[t] over non-ignored targets
};

namespace {

constexpr int64_t kBlockValues = 16384;  // input values per block of samples

// Runs fn(begin, end) -> LossTotals over fixed blocks of [0, n) in parallel
// and sums the block totals in order.
template <typename Fn>
LossTotals blocked_totals(int64_t n, int64_t cost_per_item, const Fn& fn) {
  const int64_t block = std::max<int64_t>(1, kBlockValues / std::max<int64_t>(cost_per_item, 1));
  const int64_t blocks = (n + block - 1) / block;
  std::vector<LossTotals> parts(static_cast<size_t>(blocks));
  parallel_for(0, blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) parts[i] = fn(i * block, std::min(n, (i + 1) * block));
  });
  LossTotals total;
  for (const LossTotals& p : parts) {
    total.loss += p.loss;
    total.weight += p.weight;
  }
  return total;
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

}  // namespace

LossTotals nll_loss_kernel(const Tensor& loss, const Tensor& x, const Tensor& target,
                           const Tensor& weight, int64_t N, int64_t C, int64_t S,
                           int64_t ignore_index) {
  return dispatch_floating(x.dtype(), "nll_loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());  // (N, C, S)
    const int64_t* tp = static_cast<const int64_t*>(target.data_ptr());  // (N * S)
    const T* wp = data_or_null<T>(weight);  // (C)
    T* lp = static_cast<T*>(loss.data_ptr());  // (N * S)
    return blocked_totals(N * S, 1, [&](int64_t b, int64_t e) {
      LossTotals part;
      for (int64_t i = b; i < e; ++i) {
        const int64_t t = tp[i];
        if (t == ignore_index) {
          lp[i] = 0;
          continue;
        }
        const int64_t n = i / S, s = i % S;
        const double w = wp ? static_cast<double>(wp[t]) : 1.0;
        const double l = -w * xp[(n * C + t) * S + s];
        lp[i] = static_cast<T>(l);
        part.loss += l;
        part.weight += w;
      }
      return part;
    });
  });
}

namespace {

// One sample of cross_entropy: class c's logit at row[c * stride].  Stride is
// int64_t, or Unit for (N, C) input so the loops vectorise.
using Unit = std::integral_constant<int64_t, 1>;

template <typename T, typename Stride>
double logsumexp_of(const T* row, Stride stride, int64_t C) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < C; ++c) m = row[c * stride] > m ? row[c * stride] : m;
  double sum_exp = 0;
#pragma omp simd reduction(+ : sum_exp)
  for (int64_t c = 0; c < C; ++c) sum_exp += fast_exp(row[c * stride] - m);
  return m + std::log(sum_exp);
}

// sum_c w[c] * -logp[c] (w = 1 when absent).
template <typename T, typename Stride>
double smoothing_term(const T* row, Stride stride, int64_t C, const T* wp, double lse) {
  double smooth = 0;
  if (wp) {
#pragma omp simd reduction(+ : smooth)
    for (int64_t c = 0; c < C; ++c) smooth += static_cast<double>(wp[c]) * (lse - row[c * stride]);
  } else {
#pragma omp simd reduction(+ : smooth)
    for (int64_t c = 0; c < C; ++c) smooth += lse - row[c * stride];
  }
  return smooth;
}

// Writes d loss / d x for one non-ignored sample:
//   out_c = a * p_c - b * w_c, then out_t -= d,   p_c = exp(x_c - lse).
template <typename T, typename Stride>
void cross_entropy_grad_row(T* out, const T* row, Stride stride, int64_t C, double lse,
                            const T* wp, double a, double b, int64_t t, double d) {
  const T at = static_cast<T>(a), bt = static_cast<T>(b);
  if (b == 0) {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      out[c * stride] = at * fast_exp(static_cast<T>(row[c * stride] - lse));
  } else {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      out[c * stride] = at * fast_exp(static_cast<T>(row[c * stride] - lse)) -
                        bt * (wp ? wp[c] : T(1));
  }
  out[t * stride] -= static_cast<T>(d);
}

}  // namespace

LossTotals cross_entropy_kernel(const Tensor& loss, const Tensor& logsumexp, const Tensor& x,
                                const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                                int64_t S, int64_t ignore_index, double label_smoothing) {
  return dispatch_floating(x.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());  // (N, C, S)
    const int64_t* tp = static_cast<const int64_t*>(target.data_ptr());  // (N * S)
    const T* wp = data_or_null<T>(weight);  // (C)
    T* lp = static_cast<T*>(loss.data_ptr());  // (N * S)
    double* lsep = static_cast<double*>(logsumexp.data_ptr());  // (N * S)
    const double eps = label_smoothing;
    return blocked_totals(N * S, C, [&](int64_t b, int64_t e) {
      LossTotals part;
      for (int64_t i = b; i < e; ++i) {
        const int64_t n = i / S, s = i % S;
        const T* row = xp + n * C * S + s;  // class c at row[c * S]
        const double lse = S == 1 ? logsumexp_of(row, Unit(), C) : logsumexp_of(row, S, C);
        lsep[i] = lse;
        const int64_t t = tp[i];
        if (t == ignore_index) {
          lp[i] = 0;
          continue;
        }
        const double wt = wp ? static_cast<double>(wp[t]) : 1.0;
        double l = wt * (lse - row[t * S]);
        if (eps > 0) {
          const double smooth = S == 1 ? smoothing_term(row, Unit(), C, wp, lse)
                                       : smoothing_term(row, S, C, wp, lse);
          l = (1 - eps) * l + eps / static_cast<double>(C) * smooth;
        }
        lp[i] = static_cast<T>(l);
        part.loss += l;
        part.weight += wt;
      }
      return part;
    });
  });
}

void nll_loss_backward_kernel(const Tensor& grad_input, const Tensor& grad, double scale,
                              const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                              int64_t S, int64_t ignore_index) {
  dispatch_floating(grad_input.dtype(), "nll_loss_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* gi = static_cast<T*>(grad_input.data_ptr());  // (N, C, S), zero-filled
    const T* gp = static_cast<const T*>(grad.data_ptr());  // (N * S) or (1)
    const bool broadcast = grad.numel() == 1;
    const int64_t* tp = static_cast<const int64_t*>(target.data_ptr());
    const T* wp = data_or_null<T>(weight);
    parallel_for(0, N * S, kBlockValues, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t t = tp[i];
        if (t == ignore_index) continue;
        const int64_t n = i / S, s = i % S;
        const double w = wp ? static_cast<double>(wp[t]) : 1.0;
        gi[(n * C + t) * S + s] = static_cast<T>(-w * scale * gp[broadcast ? 0 : i]);
      }
    });
  });
}

void cross_entropy_backward_kernel(const Tensor& grad_input, const Tensor& grad, double scale,
                                   const Tensor& x, const Tensor& logsumexp, const Tensor& target,
                                   const Tensor& weight, int64_t N, int64_t C, int64_t S,
                                   int64_t ignore_index, double label_smoothing) {
  dispatch_floating(x.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* gi = static_cast<T*>(grad_input.data_ptr());  // (N, C, S)
    const T* gp = static_cast<const T*>(grad.data_ptr());  // (N * S) or (1)
    const bool broadcast = grad.numel() == 1;
    const T* xp = static_cast<const T*>(x.data_ptr());  // (N, C, S)
    const double* lsep = static_cast<const double*>(logsumexp.data_ptr());  // (N * S)
    const int64_t* tp = static_cast<const int64_t*>(target.data_ptr());
    const T* wp = data_or_null<T>(weight);
    const double eps = label_smoothing;
    double w_all = static_cast<double>(C);  // sum of the class weights
    if (wp) {
      w_all = 0;
      for (int64_t c = 0; c < C; ++c) w_all += wp[c];
    }
    const int64_t grain = std::max<int64_t>(1, kBlockValues / std::max<int64_t>(C, 1));
    parallel_for(0, N * S, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t n = i / S, s = i % S;
        const T* row = xp + n * C * S + s;
        T* out = gi + n * C * S + s;
        const int64_t t = tp[i];
        if (t == ignore_index) {
          for (int64_t c = 0; c < C; ++c) out[c * S] = 0;
          continue;
        }
        // d/dx_c of (1-eps) w_t (-logp_t) + eps/C sum_j w_j (-logp_j):
        //   (1-eps) w_t (p_c - [c == t]) + eps/C (w_all p_c - w_c).
        const double g = scale * gp[broadcast ? 0 : i];
        const double wt = wp ? static_cast<double>(wp[t]) : 1.0;
        const double a = g * ((1 - eps) * wt + eps / C * w_all);  // times p_c
        const double bc = g * eps / C;                            // times -w_c
        const double d = g * (1 - eps) * wt;                      // at c == t
        if (S == 1) cross_entropy_grad_row(out, row, Unit(), C, lsep[i], wp, a, bc, t, d);
        else cross_entropy_grad_row(out, row, S, C, lsep[i], wp, a, bc, t, d);
      }
    });
  });
}

double squared_error_sum(const Tensor& x, const Tensor& y) {
  return dispatch_floating(x.dtype(), "mse_loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T* yp = static_cast<const T*>(y.data_ptr());
    return blocked_totals(x.numel(), 1, [&](int64_t b, int64_t e) {
      LossTotals part;
      double acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = b; i < e; ++i) {
        const double d = static_cast<double>(xp[i]) - yp[i];
        acc += d * d;
      }
      part.loss = acc;
      return part;
    }).loss;
  });
}

void squared_error_kernel(const Tensor& out, const Tensor& x, const Tensor& y) {
  dispatch_floating(x.dtype(), "mse_loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = static_cast<T*>(out.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T* yp = static_cast<const T*>(y.data_ptr());
    parallel_for(0, x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T d = xp[i] - yp[i];
        o[i] = d * d;
      }
    });
  });
}

void squared_error_backward_kernel(const Tensor& grad_input, const Tensor& grad, double scale,
                                   const Tensor& x, const Tensor& y) {
  dispatch_floating(x.dtype(), "mse_loss_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* gi = static_cast<T*>(grad_input.data_ptr());
    const T* gp = static_cast<const T*>(grad.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T* yp = static_cast<const T*>(y.data_ptr());
    const bool broadcast = grad.numel() == 1;
    const T two_scale = static_cast<T>(2 * scale);
    parallel_for(0, x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      if (broadcast) {
        const T k = two_scale * gp[0];
        for (int64_t i = b; i < e; ++i) gi[i] = k * (xp[i] - yp[i]);
      } else {
        for (int64_t i = b; i < e; ++i) gi[i] = two_scale * gp[i] * (xp[i] - yp[i]);
      }
    });
  });
}

// ---- the dispatch slots' signatures: totals written to 0-dim tensors ------------

namespace {
// A 0-dim tensor <- value (in its dtype).
void set_scalar(const Tensor& t, double value) {
  dispatch_floating(t.dtype(), "loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    *static_cast<T*>(t.data_ptr()) = static_cast<T>(value);
  });
}
}  // namespace

void class_loss_kernel(bool cross_entropy, const Tensor& loss, const Tensor& logsumexp,
                       const Tensor& out, const Tensor& total_weight, const Tensor& x,
                       const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                       int64_t S, int64_t ignore_index, double label_smoothing, bool mean) {
  const LossTotals totals =
      cross_entropy ? cross_entropy_kernel(loss, logsumexp, x, target, weight, N, C, S,
                                           ignore_index, label_smoothing)
                    : nll_loss_kernel(loss, x, target, weight, N, C, S, ignore_index);
  if (out.defined()) set_scalar(out, mean ? totals.loss / totals.weight : totals.loss);
  set_scalar(total_weight, totals.weight);
}

void class_loss_backward_kernel(bool cross_entropy, const Tensor& grad_input, const Tensor& grad,
                                const Tensor& divisor, const Tensor& x, const Tensor& logsumexp,
                                const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                                int64_t S, int64_t ignore_index, double label_smoothing) {
  // The divisor is a 0-dim float64 tensor on the CPU.
  const double scale =
      divisor.defined() ? 1.0 / *static_cast<const double*>(divisor.data_ptr()) : 1.0;
  if (cross_entropy)
    cross_entropy_backward_kernel(grad_input, grad, scale, x, logsumexp, target, weight, N, C, S,
                                  ignore_index, label_smoothing);
  else
    nll_loss_backward_kernel(grad_input, grad, scale, target, weight, N, C, S, ignore_index);
}

void squared_error_sum_kernel(const Tensor& out_sum, const Tensor& x, const Tensor& y,
                              double divisor) {
  set_scalar(out_sum, squared_error_sum(x, y) / divisor);
}

static const native::RegisterKernel reg_class_loss(native::class_loss_stub, kCPU,
                                                   &class_loss_kernel);
static const native::RegisterKernel reg_class_loss_backward(native::class_loss_backward_stub, kCPU,
                                                            &class_loss_backward_kernel);
static const native::RegisterKernel reg_squared_error(native::squared_error_stub, kCPU,
                                                      &squared_error_kernel);
static const native::RegisterKernel reg_squared_error_sum(native::squared_error_sum_stub, kCPU,
                                                          &squared_error_sum_kernel);
static const native::RegisterKernel reg_squared_error_backward(
    native::squared_error_backward_stub, kCPU, &squared_error_backward_kernel);

}  // namespace cpu
}  // namespace loom
