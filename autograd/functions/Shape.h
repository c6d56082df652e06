// Differentiable views, copies, joins and indexing.  The view forms are also
// Tensor methods (t.view(...), t.permute(...)).
#pragma once

#include <vector>

#include "tensor/Tensor.h"

namespace loom {

// Concatenates along dim; all tensors agree on the other dims, dtype, device.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Stacks equal-shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Picks entries of self along dim at int64 `index` (1-D).
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
// out[i][j] = self[index[i][j]][j] (dim 0), etc.; index int64, same rank.
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);
// self with src added at index along dim (out-of-place).
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace loom
