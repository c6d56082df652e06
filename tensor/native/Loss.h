// Raw losses: nll_loss, cross_entropy (fused log_softmax + nll with label
// smoothing) and mse_loss, forward and backward.
//
// Class-index losses view the input as a contiguous (N, C, S) block, S the
// product of the extra dims (1 for an (N, C) input), and the target as N * S
// int64 class indices.  Per-element loss for a target t (not ignore_index):
//   nll:           -w[t] * x[n, t, s]
//   cross_entropy: (1 - eps) * w[t] * -logp[t] + eps / C * sum_c w[c] * -logp[c]
// A mean divides the total by the sum of w[t] over non-ignored targets (as
// PyTorch 1.13 does, smoothing included).
#pragma once

#include <tuple>

#include "tensor/Tensor.h"

namespace loom {
namespace native {

enum class LossReduction { kNone, kMean, kSum };

// The checked geometry of a class-index loss.
struct ClassLossShape {
  int64_t N = 1, C = 1, S = 1;
  IntList none_shape;  // the shape of an unreduced loss: (N, d1, ...), or () for unbatched
};
// Checks input (N, C, d...) or (C) floating, target (N, d...) or () int64 with
// every value in [0, C) or equal to ignore_index, and weight (C) when given;
// names `op` in every message.
ClassLossShape check_class_loss(const char* op, const Tensor& input, const Tensor& target,
                                const Tensor& weight, int64_t ignore_index);

// Returns (loss, total_weight): loss has none_shape for kNone, else is 0-dim;
// total_weight is a 0-dim double (the mean's divisor).
std::tuple<Tensor, Tensor> nll_loss(const Tensor& input, const Tensor& target,
                                    const Tensor& weight, LossReduction reduction,
                                    int64_t ignore_index);
// grad: the gradient of the loss (none_shape or 0-dim); total_weight: the
// forward's (0-dim float64 on input's device, read there: no wait for a GPU).
// Returns input's shape.
Tensor nll_loss_backward(const Tensor& grad, const Tensor& input, const Tensor& target,
                         const Tensor& weight, LossReduction reduction, int64_t ignore_index,
                         const Tensor& total_weight);

// Returns (loss, logsumexp (none_shape, float64: the backward recomputes
// p = exp(x - lse) from it), total_weight 0-dim double).
std::tuple<Tensor, Tensor, Tensor> cross_entropy(const Tensor& input, const Tensor& target,
                                                 const Tensor& weight, LossReduction reduction,
                                                 int64_t ignore_index, double label_smoothing);
Tensor cross_entropy_backward(const Tensor& grad, const Tensor& input, const Tensor& target,
                              const Tensor& weight, const Tensor& logsumexp,
                              LossReduction reduction, int64_t ignore_index,
                              double label_smoothing, const Tensor& total_weight);

// (input - target)^2, broadcast, reduced.  Floating tensors of one dtype.
Tensor mse_loss(const Tensor& input, const Tensor& target, LossReduction reduction);
// d loss / d input over the broadcast shape (the target's gradient is its negation).
Tensor mse_loss_backward(const Tensor& grad, const Tensor& input, const Tensor& target,
                         LossReduction reduction);

}  // namespace native

namespace cpu {
// Sums of a class loss over all elements, in double.
struct LossTotals {
  double loss = 0;    // sum of the per-element losses
  double weight = 0;  // sum of w[t] over non-ignored targets
};
// Per-element class losses (weighted; 0 where ignored) into `loss` (N * S
// values of input's dtype).  x (N, C, S), target (N * S), weight (C) or
// undefined; all contiguous.  cross_entropy also writes logsumexp (N * S
// doubles).
// Totals are summed in fixed blocks, so they do not depend on the thread count.
LossTotals nll_loss_kernel(const Tensor& loss, const Tensor& x, const Tensor& target,
                           const Tensor& weight, int64_t N, int64_t C, int64_t S,
                           int64_t ignore_index);
LossTotals cross_entropy_kernel(const Tensor& loss, const Tensor& logsumexp, const Tensor& x,
                                const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                                int64_t S, int64_t ignore_index, double label_smoothing);
// grad_input (N, C, S); grad holds N * S values, or 1 (broadcast) when
// grad_numel == 1; every gradient is multiplied by `scale`.
void nll_loss_backward_kernel(const Tensor& grad_input, const Tensor& grad, double scale,
                              const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                              int64_t S, int64_t ignore_index);
void cross_entropy_backward_kernel(const Tensor& grad_input, const Tensor& grad, double scale,
                                   const Tensor& x, const Tensor& logsumexp, const Tensor& target,
                                   const Tensor& weight, int64_t N, int64_t C, int64_t S,
                                   int64_t ignore_index, double label_smoothing);
// Sum over a contiguous tensor of (x - y)^2 in double, or per element into out.
double squared_error_sum_kernel(const Tensor& x, const Tensor& y);
void squared_error_kernel(const Tensor& out, const Tensor& x, const Tensor& y);
// grad_input = scale * 2 * (x - y) * grad (grad broadcast when it has one element).
void squared_error_backward_kernel(const Tensor& grad_input, const Tensor& grad, double scale,
                                   const Tensor& x, const Tensor& y);
}  // namespace cpu

namespace cuda {
// The CUDA twins (tensor/native/CudaNn.cpp, kernels in tensor/cuda/Loss.cu),
// queued on the device's current stream; totals stay on the device.
// Per-element class losses into `loss` (N * S values), the logsumexp per
// sample (cross_entropy only; undefined for nll), the reduced loss into `out`
// (0-dim of x's dtype: the sum, or the mean over the total weight when
// `mean`; undefined for an unreduced loss) and the total weight into
// `total_weight` (0-dim float64).  Targets must be checked first.
void class_loss_kernel(bool cross_entropy, const Tensor& loss, const Tensor& logsumexp,
                       const Tensor& out, const Tensor& total_weight, const Tensor& x,
                       const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                       int64_t S, int64_t ignore_index, double label_smoothing, bool mean);
// As cpu::nll_loss_backward_kernel / cross_entropy_backward_kernel, the
// gradients divided by `divisor` (0-dim float64 on the device; undefined: 1)
// instead of multiplied by a host scale; nll needs a zero-filled grad_input,
// logsumexp is undefined for nll.
void class_loss_backward_kernel(bool cross_entropy, const Tensor& grad_input, const Tensor& grad,
                                const Tensor& divisor, const Tensor& x, const Tensor& logsumexp,
                                const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                                int64_t S, int64_t ignore_index, double label_smoothing);
// out (x's shape) = (x - y)^2; out_sum (0-dim) = sum of (x - y)^2 / divisor.
void squared_error_kernel(const Tensor& out, const Tensor& x, const Tensor& y);
void squared_error_sum_kernel(const Tensor& out_sum, const Tensor& x, const Tensor& y,
                              double divisor);
void squared_error_backward_kernel(const Tensor& grad_input, const Tensor& grad, double scale,
                                   const Tensor& x, const Tensor& y);
}  // namespace cuda
}  // namespace loom
