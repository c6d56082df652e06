// Raw reductions: argument checks, output allocation and the (outer, reduce,
// inner) layout; the loops are in tensor/cpu/Reduce.cpp.
#include "tensor/native/Reduce.h"

#include <algorithm>

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Unary.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

DispatchStub<SumKernel> sum_stub("sum");
DispatchStub<VarKernel> var_stub("var");
DispatchStub<ExtremumKernel> extremum_stub("max/min");
DispatchStub<ScatterReducedKernel> scatter_reduced_stub("max/min backward");

namespace {

// For the reductions with a CUDA kernel too.
void check_device(const char* op, const Tensor& self) {
  check_kernel_device(op, self);
}

void sum_on_device(const Tensor& out, const ReduceView& v, bool mean) {
  sum_stub(out.device(), out, v, mean);
}

void extremum_on_device(const Tensor& values, const Tensor& indices, const ReduceView& v,
                        bool is_max) {
  extremum_stub(v.src.device(), values, indices, v, is_max);
}

void check_floating(const char* op, const Tensor& self) {
  LOOM_CHECK(self.is_floating_point(), op,
             ": expected a floating-point tensor (float32 or float64), got ", self.describe(),
             "; convert it with .to(kFloat32) first");
}

// self in its kernels' compute dtype: float16/bfloat16 reduce (and
// accumulate) in float32, rounded once at the end.
Tensor to_compute(const Tensor& self) {
  return to(self, self.device(), compute_dtype(self.dtype()));
}

TensorOptions like(const Tensor& self, DType dtype) {
  return TensorOptions(dtype).device(self.device());
}

std::vector<bool> one_dim_mask(const Tensor& self, int64_t dim, const char* op) {
  return dim_mask({dim}, self.dim(), op);
}

// (values, indices) of a max/min along dim; either may be skipped.
std::tuple<Tensor, Tensor> extremum(const char* op, const Tensor& self, int64_t dim, bool keepdim,
                                    bool is_max, bool want_values) {
  check_defined(op, self, "self");
  check_device(op, self);
  const std::vector<bool> mask = one_dim_mask(self, dim, op);
  const int64_t d = wrap_dim(dim, self.dim(), op);
  const int64_t reduce_size = self.dim() == 0 ? 1 : self.sizes()[d];
  LOOM_CHECK(reduce_size > 0, op, ": cannot reduce over dim ", d, " of size 0 in ",
             self.describe(), " (there is no ", is_max ? "max" : "min", " of nothing)");
  const IntList shape = reduced_shape(self.sizes(), mask, keepdim);
  const Tensor src = to_compute(self);
  Tensor values = want_values ? empty(shape, like(src, src.dtype())) : Tensor();
  Tensor indices = empty(shape, like(self, kInt64));
  extremum_on_device(values, indices, reduce_view(src, mask), is_max);
  return {want_values ? to(values, values.device(), self.dtype()) : values, indices};
}

Tensor extremum_all(const char* op, const Tensor& self, bool is_max, bool want_index) {
  check_defined(op, self, "self");
  check_device(op, self);
  LOOM_CHECK(self.numel() > 0, op, ": expected a non-empty tensor, got ", self.describe(),
             "; reduce along a dim instead");
  const std::vector<bool> mask(self.dim(), true);
  const Tensor src = to_compute(self);
  Tensor values = want_index ? Tensor() : empty({}, like(src, src.dtype()));
  Tensor index = empty({}, like(self, kInt64));
  extremum_on_device(values, index, reduce_view(src, mask), is_max);
  return want_index ? index : to(values, values.device(), self.dtype());
}

}  // namespace

ReduceView reduce_view(const Tensor& self, const std::vector<bool>& mask) {
  ReduceView v;
  // The reduced dims of size > 1 must form one adjacent block to avoid a permute.
  int state = 0;  // 0: before the block, 1: inside, 2: after
  bool adjacent = true;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (self.sizes()[d] == 1) continue;
    if (mask[d]) {
      if (state == 2) adjacent = false;
      state = 1;
    } else if (state == 1) {
      state = 2;
    }
  }
  if (!adjacent) {
    v.src = reduction_layout(self, mask, v.outer, v.reduce);
    return v;
  }
  v.src = contiguous(self);
  state = 0;
  for (int64_t d = 0; d < self.dim(); ++d) {
    const int64_t s = self.sizes()[d];
    if (s == 1) continue;
    if (mask[d]) {
      v.reduce *= s;
      state = 1;
    } else if (state == 0) {
      v.outer *= s;
    } else {
      v.inner *= s;
    }
  }
  return v;
}

Tensor reduction_layout(const Tensor& self, const std::vector<bool>& mask, int64_t& outer,
                        int64_t& inner) {
  IntList order;
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (!mask[d]) {
      order.push_back(d);
      outer *= self.sizes()[d];
    }
  for (int64_t d = 0; d < self.dim(); ++d)
    if (mask[d]) {
      order.push_back(d);
      inner *= self.sizes()[d];
    }
  return contiguous(permute(self, order));
}

Tensor sum(const Tensor& self, IntList dims, bool keepdim) {
  check_defined("sum", self, "self");
  check_device("sum", self);
  const std::vector<bool> mask = dim_mask(dims, self.dim(), "sum");
  const DType out_dtype = is_floating_point(self.dtype()) ? self.dtype() : kInt64;
  Tensor out = empty(reduced_shape(self.sizes(), mask, keepdim),
                     like(self, compute_dtype(out_dtype)));
  sum_on_device(out, reduce_view(to_compute(self), mask), /*mean=*/false);
  return to(out, out.device(), out_dtype);
}

Tensor mean(const Tensor& self, IntList dims, bool keepdim) {
  check_defined("mean", self, "self");
  check_floating("mean", self);
  check_device("mean", self);
  const std::vector<bool> mask = dim_mask(dims, self.dim(), "mean");
  const Tensor src = to_compute(self);
  Tensor out = empty(reduced_shape(self.sizes(), mask, keepdim), like(src, src.dtype()));
  sum_on_device(out, reduce_view(src, mask), /*mean=*/true);
  return to(out, out.device(), self.dtype());
}

Tensor var(const Tensor& self, IntList dims, int64_t correction, bool keepdim, bool take_sqrt) {
  const char* op = take_sqrt ? "std" : "var";
  check_defined(op, self, "self");
  check_floating(op, self);
  check_device(op, self);
  LOOM_CHECK(correction >= 0, op, ": correction must be non-negative, got ", correction);
  const std::vector<bool> mask = dim_mask(dims, self.dim(), op);
  const Tensor src = to_compute(self);
  Tensor out = empty(reduced_shape(self.sizes(), mask, keepdim), like(src, src.dtype()));
  var_stub(self.device(), out, reduce_view(src, mask), correction, take_sqrt);
  return to(out, out.device(), self.dtype());
}

Tensor max(const Tensor& self) { return extremum_all("max", self, true, false); }
Tensor min(const Tensor& self) { return extremum_all("min", self, false, false); }
Tensor argmax(const Tensor& self) { return extremum_all("argmax", self, true, true); }
Tensor argmin(const Tensor& self) { return extremum_all("argmin", self, false, true); }

std::tuple<Tensor, Tensor> max(const Tensor& self, int64_t dim, bool keepdim) {
  return extremum("max", self, dim, keepdim, true, true);
}
std::tuple<Tensor, Tensor> min(const Tensor& self, int64_t dim, bool keepdim) {
  return extremum("min", self, dim, keepdim, false, true);
}
Tensor argmax(const Tensor& self, int64_t dim, bool keepdim) {
  return std::get<1>(extremum("argmax", self, dim, keepdim, true, false));
}
Tensor argmin(const Tensor& self, int64_t dim, bool keepdim) {
  return std::get<1>(extremum("argmin", self, dim, keepdim, false, false));
}

Tensor select_along_dim_backward(const Tensor& grad, const Tensor& indices, const IntList& sizes,
                                 int64_t dim, bool keepdim) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  const int64_t d = wrap_dim(dim, rank, "max/min backward");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= sizes[i];
  for (int64_t i = d + 1; i < rank; ++i) inner *= sizes[i];
  const int64_t reduce = rank == 0 ? 1 : sizes[d];
  (void)keepdim;  // grad and indices are read in row-major order either way
  check_device("max/min backward", grad);
  const Tensor g = to_compute(grad);
  Tensor grad_input = zeros(sizes, like(g, g.dtype()));
  scatter_reduced_stub(grad.device(), grad_input, contiguous(g), contiguous(indices), outer,
                       reduce, inner);
  return to(grad_input, grad_input.device(), grad.dtype());
}

}  // namespace native
}  // namespace loom
