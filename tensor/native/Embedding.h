// Raw index-to-row ops: embedding lookup (and its backward), one_hot.
//
// Indices are int64 (int32 is accepted and widened) of any shape and are
// checked against the table size before any kernel runs, so a bad index
// throws naming it instead of reading out of bounds.
#pragma once

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// weight (V, D), indices (...) -> (..., D): the rows of weight.
Tensor embedding(const Tensor& weight, const Tensor& indices);
// grad (..., D) -> (V, D): each grad row added to the row its index names.
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights);
// indices (...) -> (..., num_classes) int64 with a 1 at each index;
// num_classes -1 means max + 1.
Tensor one_hot(const Tensor& indices, int64_t num_classes);


// ---- kernels (one slot per device type) -----------------------------------------
// out (n, D), weight (V, D), indices (n) int64, already checked; all contiguous.
using EmbeddingKernel = void (*)(const Tensor& out, const Tensor& weight, const Tensor& indices);
// grad_weight (V, D) zero-filled, grad (n, D), indices (n); all contiguous.  On
// CUDA rows are added with atomics (float sums of repeated indices may round
// in any order).
using EmbeddingBackwardKernel = void (*)(const Tensor& grad_weight, const Tensor& grad,
                                         const Tensor& indices);
extern DispatchStub<EmbeddingKernel> embedding_stub;
extern DispatchStub<EmbeddingBackwardKernel> embedding_backward_stub;

}  // namespace native
}  // namespace loom
