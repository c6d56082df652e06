// Differentiable reductions and softmax.  An empty `dims` list means all
// dims.  Reducing an empty dim follows PyTorch (sum 0, mean nan, max throws).
#pragma once

#include <tuple>

#include "tensor/Tensor.h"

namespace loom {

Tensor sum(const Tensor& self, IntList dims = {}, bool keepdim = false);
Tensor mean(const Tensor& self, IntList dims = {}, bool keepdim = false);
Tensor var(const Tensor& self, IntList dims = {}, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& self, IntList dims = {}, bool unbiased = true, bool keepdim = false);
// Max/min of all elements.
Tensor max(const Tensor& self);
Tensor min(const Tensor& self);
// (values, indices) along dim; the gradient flows to the selected element.
std::tuple<Tensor, Tensor> max(const Tensor& self, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& self, int64_t dim, bool keepdim = false);
// Index of the max/min over the flattened tensor, or along dim (int64).
Tensor argmax(const Tensor& self);
Tensor argmax(const Tensor& self, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& self);
Tensor argmin(const Tensor& self, int64_t dim, bool keepdim = false);
Tensor softmax(const Tensor& self, int64_t dim);
Tensor log_softmax(const Tensor& self, int64_t dim);

// Sums a (broadcast) gradient back down to `sizes`: the reverse of expand.
Tensor sum_to(const Tensor& grad, const IntList& sizes);

}  // namespace loom
