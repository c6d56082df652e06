// Losses, dropout, one_hot and embedding.
#pragma once

#include "tensor/Generator.h"
#include "tensor/Tensor.h"

namespace loom {

enum class Reduction { kNone, kMean, kSum };

// input (N, C) or (N, C, d1, ...) log-probabilities; target (N) or (N, d1, ...)
// int64 class indices.  Targets equal to ignore_index contribute nothing (and
// are excluded from the mean).  A target outside [0, C) throws naming it.
Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean,
                int64_t ignore_index = -100, const Tensor& weight = Tensor());
// log_softmax over dim 1 followed by nll_loss, with label smoothing as in
// PyTorch (1 - s on the target, s / C spread over all classes).
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     Reduction reduction = Reduction::kMean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0, const Tensor& weight = Tensor());
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean);
// Zeroes elements with probability p and scales the rest by 1/(1-p) when
// training; identity otherwise.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true,
               Generator* gen = nullptr);
// int64 indices (any shape) -> (..., num_classes) int64; num_classes -1 means max + 1.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
// Rows of weight (V, D) picked by int64 indices (any shape) -> (..., D).
Tensor embedding(const Tensor& weight, const Tensor& indices);

}  // namespace loom
