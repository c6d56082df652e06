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
#include "tensor/native/DispatchStub.h"

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


// ---- kernels (one slot per device type) -----------------------------------------
// Totals stay on the tensor's device, so a CUDA loss never waits for the GPU.
//
// Per-element class losses into `loss` (N * S values of x's dtype; weighted,
// 0 where ignored), the logsumexp per sample (cross_entropy only, N * S
// doubles; undefined for nll), the reduced loss into `out` (0-dim of x's
// dtype: the sum, or the mean over the total weight when `mean`; undefined
// for an unreduced loss) and the total weight (the sum of w[t] over
// non-ignored targets) into `total_weight` (0-dim float64).  x (N, C, S),
// target (N * S) already checked, weight (C) or undefined; all contiguous.
// Totals are summed in fixed blocks, so they do not depend on the thread count.
using ClassLossKernel = void (*)(bool cross_entropy, const Tensor& loss, const Tensor& logsumexp,
                                 const Tensor& out, const Tensor& total_weight, const Tensor& x,
                                 const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                                 int64_t S, int64_t ignore_index, double label_smoothing,
                                 bool mean);
// grad_input (N, C, S) (zero-filled for nll); grad holds N * S values, or one
// (broadcast); every gradient is divided by `divisor` (0-dim float64 on the
// device; undefined: 1).  logsumexp is undefined for nll.
using ClassLossBackwardKernel = void (*)(bool cross_entropy, const Tensor& grad_input,
                                         const Tensor& grad, const Tensor& divisor,
                                         const Tensor& x, const Tensor& logsumexp,
                                         const Tensor& target, const Tensor& weight, int64_t N,
                                         int64_t C, int64_t S, int64_t ignore_index,
                                         double label_smoothing);
// out (x's shape) = (x - y)^2.
using SquaredErrorKernel = void (*)(const Tensor& out, const Tensor& x, const Tensor& y);
// out_sum (0-dim) = sum of (x - y)^2 / divisor, summed in double.
using SquaredErrorSumKernel = void (*)(const Tensor& out_sum, const Tensor& x, const Tensor& y,
                                       double divisor);
// grad_input = scale * 2 * (x - y) * grad (grad broadcast when it has one element).
using SquaredErrorBackwardKernel = void (*)(const Tensor& grad_input, const Tensor& grad,
                                            double scale, const Tensor& x, const Tensor& y);

extern DispatchStub<ClassLossKernel> class_loss_stub;
extern DispatchStub<ClassLossBackwardKernel> class_loss_backward_stub;
extern DispatchStub<SquaredErrorKernel> squared_error_stub;
extern DispatchStub<SquaredErrorSumKernel> squared_error_sum_stub;
extern DispatchStub<SquaredErrorBackwardKernel> squared_error_backward_stub;

}  // namespace native
}  // namespace loom
