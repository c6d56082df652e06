// Raw (non-differentiable) views: new TensorImpls over the same Storage,
// sharing the base's version counter.  Differentiable forms are the Tensor
// methods of the same names.
#pragma once

#include <vector>

#include "tensor/Tensor.h"

namespace loom {
namespace native {

Tensor as_strided(const Tensor& self, IntList sizes, IntList strides, int64_t storage_offset);
// Throws when the sizes do not hold numel() elements or the layout cannot be
// viewed without a copy (then reshape() is the answer).  One size may be -1.
Tensor view(const Tensor& self, IntList sizes);
// A view when possible, otherwise a contiguous copy.
Tensor reshape(const Tensor& self, IntList sizes);
Tensor permute(const Tensor& self, IntList dims);
Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1);
Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& self, int64_t dim, int64_t index);
Tensor slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step);
Tensor expand(const Tensor& self, IntList sizes);
Tensor squeeze(const Tensor& self);
Tensor squeeze(const Tensor& self, int64_t dim);
Tensor unsqueeze(const Tensor& self, int64_t dim);
Tensor flatten(const Tensor& self, int64_t start_dim, int64_t end_dim);

// Resolves one -1 in `sizes` against numel; throws when impossible.
IntList infer_size(IntList sizes, int64_t numel, const char* what);

}  // namespace native
}  // namespace loom
