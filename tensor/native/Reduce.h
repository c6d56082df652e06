// Raw (non-differentiable) reductions.  `dims` empty means all dims.
//
// Every reduction views its input as a contiguous (outer, reduced, inner)
// block (ReduceView): when the reduced dims are adjacent no data moves,
// otherwise they are permuted to the end first.  The CPU kernels in
// tensor/cpu/Reduce.cpp then reduce the middle axis, in parallel over outputs,
// or over the reduced axis itself when there are too few outputs to share.
// On CUDA, sum, mean and the max/min family run tensor/cuda/Reduce.cu's
// kernels over the same view.
#pragma once

#include <tuple>

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// self as a contiguous (outer, reduce, inner) block: output (o, i) reduces
// src[o, :, i].  Outputs are in the row-major order of the kept dims.
struct ReduceView {
  Tensor src;  // contiguous
  int64_t outer = 1;
  int64_t reduce = 1;
  int64_t inner = 1;
};
ReduceView reduce_view(const Tensor& self, const std::vector<bool>& mask);

// Moves the reduced dims of self to the end and makes it contiguous, so each
// output element reduces one contiguous run of `inner` values.  Returns the
// rearranged tensor; sets outer (number of outputs) and inner.
Tensor reduction_layout(const Tensor& self, const std::vector<bool>& mask, int64_t& outer,
                        int64_t& inner);

// Sum; integer and bool inputs sum to int64, floats keep their dtype
// (accumulated in double).
Tensor sum(const Tensor& self, IntList dims, bool keepdim);
// Mean of a floating tensor (an empty reduction gives nan); throws for other dtypes.
Tensor mean(const Tensor& self, IntList dims, bool keepdim);
// Variance (sum of squared deviations over max(0, n - correction)), or its
// square root when take_sqrt; floating tensors only.
Tensor var(const Tensor& self, IntList dims, int64_t correction, bool keepdim,
           bool take_sqrt = false);
// Max/min of all elements (0-dim); throws for an empty tensor.  NaN wins.
Tensor max(const Tensor& self);
Tensor min(const Tensor& self);
// (values, int64 indices) along dim; the first of equal values wins.
std::tuple<Tensor, Tensor> max(const Tensor& self, int64_t dim, bool keepdim);
std::tuple<Tensor, Tensor> min(const Tensor& self, int64_t dim, bool keepdim);
// Index of the first max/min over the flattened tensor (0-dim int64).
Tensor argmax(const Tensor& self);
Tensor argmin(const Tensor& self);
Tensor argmax(const Tensor& self, int64_t dim, bool keepdim);
Tensor argmin(const Tensor& self, int64_t dim, bool keepdim);
// Backward of a value-selecting reduction along dim: zeros of `sizes` with
// grad[..] placed at indices[..] along dim.  grad and indices have the
// reduced shape (keepdim as given).
Tensor select_along_dim_backward(const Tensor& grad, const Tensor& indices, const IntList& sizes,
                                 int64_t dim, bool keepdim);

// ---- kernels (one slot per device type) -----------------------------------------
// Kernels over a ReduceView; `out`/`indices` are contiguous with
// outer * inner elements.
using SumKernel = void (*)(const Tensor& out, const ReduceView& v, bool mean);
using VarKernel = void (*)(const Tensor& out, const ReduceView& v, int64_t correction,
                           bool take_sqrt);
// values and/or indices may be undefined (argmax needs only indices).
using ExtremumKernel = void (*)(const Tensor& values, const Tensor& indices, const ReduceView& v,
                                bool is_max);
// grad_input (outer, reduce, inner) zero-filled; grad and indices (outer, inner).
using ScatterReducedKernel = void (*)(const Tensor& grad_input, const Tensor& grad,
                                      const Tensor& indices, int64_t outer, int64_t reduce,
                                      int64_t inner);

extern DispatchStub<SumKernel> sum_stub;
extern DispatchStub<VarKernel> var_stub;
extern DispatchStub<ExtremumKernel> extremum_stub;
extern DispatchStub<ScatterReducedKernel> scatter_reduced_stub;

}  // namespace native
}  // namespace loom
