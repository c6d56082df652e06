// CUDA layer-norm launchers on raw pointers, for the host glue in
// tensor/cuda/LayerNorm.cpp (kernels in LayerNorm.cu).  Plain C++.
//
// Same contract as the kernel slots of tensor/native/LayerNorm.h: contiguous
// (M, N) x, y, grad_out, grad_input of `dtype` (float32 or float64); mean,
// rstd (M); weight, bias (N) may be null (1 and 0); null gradients are
// skipped.  Each call queues its kernels on `stream` (a cudaStream_t as an
// integer) of CUDA device `device` and returns without waiting; throws
// loom::Error on a CUDA error.
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cuda {

// y = (x - mean) * rstd * weight + bias per row; writes mean and rstd.
void layer_norm_forward(DType dtype, const void* x, const void* weight, const void* bias,
                        int64_t M, int64_t N, double eps, void* y, void* mean, void* rstd,
                        int device, uint64_t stream);

// Doubles of scratch layer_norm_backward needs for grad_weight / grad_bias:
// each row's mean correction (M) and the partial column sums (2 * chunks * N).
int64_t layer_norm_backward_scratch(int64_t M, int64_t N);

// Gradients from the forward's mean and rstd.  scratch: device memory of
// layer_norm_backward_scratch(M, N) doubles when grad_weight or grad_bias is
// wanted, else may be null.
void layer_norm_backward(DType dtype, const void* grad_out, const void* x, const void* mean,
                         const void* rstd, const void* weight, int64_t M, int64_t N,
                         void* grad_input, void* grad_weight, void* grad_bias, double* scratch,
                         int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
