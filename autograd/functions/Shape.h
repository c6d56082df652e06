// Differentiable views, copies, joins and indexing.  The view forms are
// Tensor methods (t.view(...), t.permute(...), t.narrow(...)); they alias the
// input's storage, and their backward maps the gradient back onto the
// input's shape.  Joins and indexing return new tensors.  Every op throws
// loom::Error naming itself, the argument and the shapes/dtypes/devices on
// bad input (tensors on two devices: both devices).
//
// In-place writes through a view (copy_, mul_, ...) record history on the
// view only: a view of a tensor that requires grad cannot be written in place
// (autograd::check_inplace), and a base that does not require grad does not
// pick up the view's history.  Build such results with cat/stack instead.
#pragma once

#include <vector>

#include "tensor/Tensor.h"

namespace loom {

// Concatenates along dim (negative counts from the end); all tensors agree on
// the other dims and sit on one device; the dtype is the promoted one.  1-D
// tensors of shape [0] are skipped, as in PyTorch.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Stacks equal-shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Picks entries of self along dim at int64 `index` (1-D).
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
// self with source's slices added at `index` (1-D int64) along dim
// (out-of-place; repeated indices accumulate).  source: self's shape except
// index.numel() along dim.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
// out[i][j] = self[index[i][j]][j] (dim 0), etc.; index int64, same rank.
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);
// self with src added at index along dim (out-of-place).
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace loom
