// CUDA optimizer steps on raw pointers, for tensor/cuda/Optim.cpp (kernels in
// Optim.cu).
//
// Multi-tensor: one call updates `count` parameters of one dtype (float32 or
// float64) on one device.  The pointer lists travel to the device inside the
// kernel's argument block (kMaxListTensors per launch, as PyTorch's
// foreach/fused kernels do), so a model's step is a handful of launches
// instead of one per parameter.  Every buffer is contiguous with numels[k]
// elements.  The per-element math is the CPU kernels' (tensor/cpu/Optim.cpp), one rounding per
// operation in the same order (the kernels use the _rn intrinsics, so nvcc
// cannot contract a multiply and an add into an FMA), and the scalar
// hyperparameters are rounded to the parameter's dtype as there: trajectories
// match the CPU's bit for bit.
//
// Each call queues kernels on stream `stream` of device `device` and returns
// without waiting.  Throws loom::Error on a CUDA error.
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cuda {

// The scalar constants of one SGD step, already as the CPU computes them (in
// double; the kernel rounds each to the parameter's dtype).
struct SgdConstants {
  double lr = 0, weight_decay = 0, momentum = 0, one_minus_dampening = 1;
  bool use_weight_decay = false, use_momentum = false, nesterov = false, maximize = false;
};

// params[k] -= lr * direction; bufs[k] is parameter k's momentum buffer (null
// without momentum), set from the direction where first[k].
void sgd_step(DType dtype, int count, void* const* params, const void* const* grads,
              void* const* bufs, const bool* first, const int64_t* numels,
              const SgdConstants& c, int device, uint64_t stream);

struct AdamConstants {
  double beta1 = 0, beta2 = 0, one_minus_beta1 = 0, one_minus_beta2 = 0, weight_decay = 0,
         decay = 1, eps = 0;
  bool use_weight_decay = false, decoupled = false, maximize = false;
};

// One Adam/AdamW step per parameter; max_exp_avg_sqs[k] null unless amsgrad.
// neg_step_size[k] = -lr / (1 - beta1^step) and bias_correction2_sqrt[k] =
// sqrt(1 - beta2^step) for parameter k's step count.
void adam_step(DType dtype, int count, void* const* params, const void* const* grads,
               void* const* exp_avgs, void* const* exp_avg_sqs, void* const* max_exp_avg_sqs,
               const double* neg_step_size, const double* bias_correction2_sqrt,
               const int64_t* numels, const AdamConstants& c, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
