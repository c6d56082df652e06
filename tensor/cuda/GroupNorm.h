// CUDA group-norm launchers on raw pointers, for the host glue in
// tensor/cuda/GroupNorm.cpp (kernels in GroupNorm.cu).  Plain C++.
//
// Same contract as the kernel slots of tensor/native/GroupNorm.h: contiguous
// (N, C, HxW) x, y, grad_out, grad_input of `dtype` (float32 or float64),
// C = G groups of D = C / G channels; mean, rstd (N, G); weight, bias (C) may
// be null (1 and 0); null gradients are skipped.  Each call queues its
// kernels on `stream` (a cudaStream_t as an integer) of CUDA device `device`
// and returns without waiting; throws loom::Error on a CUDA error.
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cuda {

// y = (x - mean) * rstd * weight[c] + bias[c] per group; writes mean, rstd.
void group_norm_forward(DType dtype, const void* x, const void* weight, const void* bias,
                        int64_t N, int64_t C, int64_t HxW, int64_t G, double eps, void* y,
                        void* mean, void* rstd, int device, uint64_t stream);

// Doubles of scratch group_norm_backward needs: three per-(n, c) sums and
// three per-(n, g) coefficients, 3 * N * C + 3 * N * G.
int64_t group_norm_backward_scratch(int64_t N, int64_t C, int64_t G);

// Gradients from the forward's mean and rstd; scratch: device memory of
// group_norm_backward_scratch(N, C, G) doubles.
void group_norm_backward(DType dtype, const void* grad_out, const void* x, const void* mean,
                         const void* rstd, const void* weight, int64_t N, int64_t C, int64_t HxW,
                         int64_t G, void* grad_input, void* grad_weight, void* grad_bias,
                         double* scratch, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
