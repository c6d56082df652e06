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
#include "tensor/native/DispatchStub.h"

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


// Checks that every value of idx (contiguous int64) lies in [0, limit) or,
// when has_ignore, equals `ignore`; for the first bad value v, message(v) is
// the error.  On the CPU it throws at once; on a CUDA device it is a deferred
// check (tensor/DeferredChecks.h): queued on the device's current stream and
// thrown at the next sync point without making the host wait (with
// cuda::sync_checks() it waits and throws here).
void check_index_values(const Tensor& idx, int64_t limit, bool has_ignore, int64_t ignore,
                        const std::function<std::string(int64_t)>& message);

// ---- kernels (one slot per device type) -----------------------------------------
// Outputs are fresh contiguous tensors of the result shape (index_add /
// scatter_add: already holding self's values); index is a contiguous int64
// tensor; for index_select/index_add the other operands are contiguous too,
// for gather/scatter_add they may be strided.  Each kernel checks all index
// values before it writes anything (the CPU's throw at once; CUDA's check on
// the device, skip bad values, and report through check_index_values'
// deferred path).  CUDA's index_add and scatter_add accumulate with atomics
// (float sums of repeated indices may round in any order).
using IndexSelectKernel = void (*)(const Tensor& out, const Tensor& self, int64_t dim,
                                   const Tensor& index);
using IndexAddKernel = void (*)(const Tensor& out, int64_t dim, const Tensor& index,
                                const Tensor& source);
using GatherKernel = void (*)(const Tensor& out, const Tensor& self, int64_t dim,
                              const Tensor& index);
using ScatterAddKernel = void (*)(const Tensor& out, int64_t dim, const Tensor& index,
                                  const Tensor& src);
using CheckIndexValuesKernel = void (*)(const Tensor& idx, int64_t limit, bool has_ignore,
                                        int64_t ignore,
                                        const std::function<std::string(int64_t)>& message);

extern DispatchStub<IndexSelectKernel> index_select_stub;
extern DispatchStub<IndexAddKernel> index_add_stub;
extern DispatchStub<GatherKernel> gather_stub;
extern DispatchStub<ScatterAddKernel> scatter_add_stub;
extern DispatchStub<CheckIndexValuesKernel> check_index_values_stub;

}  // namespace native
}  // namespace loom
