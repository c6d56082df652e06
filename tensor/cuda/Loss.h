// CUDA loss launchers on raw pointers, for tensor/cuda/Loss.cpp (kernels in
// Loss.cu).
//
// Class-index losses read x as a contiguous (N, C, S) block of `dtype`
// (float32/float64), target as N * S int64 class indices (already checked to
// be in [0, C) or ignore_index; any other value is treated as ignored, never
// read out of bounds) and weight as C values of `dtype`, or null.  Totals are
// summed in double in a fixed two-level tree (deterministic).
//
// `scratch` is device memory for per-sample sums and partial totals: at least
// class_loss_scratch(N * S) doubles for the class losses, kLossScratch for the
// others.
// Each call queues kernels on stream `stream` of device `device` and returns
// without waiting.  Throws loom::Error on a CUDA error.
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cuda {

constexpr int64_t kLossScratch = 1024;
inline int64_t class_loss_scratch(int64_t samples) { return kLossScratch + 2 * samples; }

// Per-element losses into loss (N * S values of dtype; 0 where ignored); the
// reduced loss into out (one value of dtype: the sum, or the sum divided by the
// total weight when mean; out may be null) and the total weight (sum of w[t]
// over non-ignored targets) into total_weight (one double).  cross_entropy
// also writes one logsumexp per sample (N * S doubles) and applies label
// smoothing (see native/Loss.h).
void class_loss_forward(DType dtype, bool cross_entropy, const void* x, const int64_t* target,
                        const void* weight, int64_t N, int64_t C, int64_t S, int64_t ignore_index,
                        double label_smoothing, void* loss, double* logsumexp, void* out,
                        double* total_weight, bool mean, double* scratch, int device,
                        uint64_t stream);

// grad_input (N, C, S) of dtype.  grad holds N * S values, or one when
// grad_broadcast.  Every gradient is divided by *divisor (one double of
// device memory: the forward's total weight, for a mean; null: 1), read on
// the device.  nll: grad_input must be zero-filled.  cross_entropy reads the
// forward's logsumexp (N * S doubles).
void class_loss_backward(DType dtype, bool cross_entropy, void* grad_input, const void* grad,
                         bool grad_broadcast, const double* divisor,
                         const void* x, const double* logsumexp, const int64_t* target,
                         const void* weight, int64_t N, int64_t C, int64_t S,
                         int64_t ignore_index, double label_smoothing, double* scratch,
                         int device, uint64_t stream);

// x, y: n contiguous values of dtype.  per_element: out[i] = (x - y)^2 (n
// values); else out (one value) = sum of (x - y)^2 in double, / divisor.
void squared_error(DType dtype, const void* x, const void* y, int64_t n, bool per_element,
                   double divisor, void* out, double* scratch, int device, uint64_t stream);
// grad_input = two_scale * grad * (x - y), grad broadcast when grad_broadcast.
void squared_error_backward(DType dtype, void* grad_input, const void* grad, bool grad_broadcast,
                            double two_scale, const void* x, const void* y, int64_t n,
                            int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
