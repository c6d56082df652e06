// Raw (non-differentiable) indexing: index_select, index_add, gather,
// scatter_add.  Shapes, dtypes and devices are checked here; the kernels in
// tensor/cpu/Index.cpp check every index value against its dim and throw
// "<op>: index V is out of bounds for dimension D with size S".  Negative
// index values are out of bounds, as in PyTorch's gather.  Results are new
// tensors on self's device; nothing is modified in place.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "tensor/Tensor.h"

namespace loom {
namespace native {

// Entries of self along dim at `index` (1-D or 0-dim, int64 or int32):
// out.size(dim) == index.numel(), the other dims as self.
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
// A copy of self with source's slices added at `index` along dim (repeated
// indices accumulate).  source has self's shape except source.size(dim) ==
// index.numel(), and self's dtype.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
// out[i][j] = self[index[i][j]][j] for dim 0 (likewise for other dims).
// index is int64 of self's rank with index.size(d) <= self.size(d) for d != dim;
// out has index's shape and self's dtype.
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);
// A copy of self with out[index[i][j]][j] += src[i][j] for dim 0 (likewise for
// other dims).  index is int64; self, index and src share one rank, with
// index.size(d) <= src.size(d) for every d and <= self.size(d) for d != dim;
// src has self's dtype.
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace native

namespace cpu {
// The kernels: outputs are fresh contiguous tensors of the result shape
// (index_add/scatter_add: already holding self's values); index is a
// contiguous int64 tensor; for index_select/index_add the other operands are
// contiguous too, for gather/scatter_add they may be strided.  Each kernel
// checks all index values before it writes anything.
void index_select_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index);
void index_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& source);
void gather_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index);
void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
}  // namespace cpu

namespace cuda {
// The CUDA twins (tensor/native/CudaNn.cpp, kernels in tensor/cuda/Index.cu),
// same operand contracts, queued on the device's current stream.  Each checks
// the index values on the device (check_index_values: the CPU kernels'
// message for the first bad one, raised at the next sync point) and skips
// bad ones, never touching memory outside its tensors.
// index_add and scatter_add accumulate with atomics (float sums of repeated
// indices may round in any order).
void index_select_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index);
void index_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& source);
void gather_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index);
void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
// Checks that every value of idx (contiguous int64 on a CUDA device) lies in
// [0, limit) or, when has_ignore, equals `ignore`; for the first bad value v,
// message(v) is the error.  A deferred check (tensor/DeferredChecks.h): queued
// on the device's current stream and thrown at the next sync point, without
// making the host wait; with sync_checks() it waits and throws here.
// (tensor/native/CudaIndexCheck.cpp)
void check_index_values(const Tensor& idx, int64_t limit, bool has_ignore, int64_t ignore,
                        const std::function<std::string(int64_t)>& message);
}  // namespace cuda
}  // namespace loom
