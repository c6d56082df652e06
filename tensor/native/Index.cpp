#include "tensor/native/Index.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

DispatchStub<IndexSelectKernel> index_select_stub("index_select");
DispatchStub<IndexAddKernel> index_add_stub("index_add");
DispatchStub<GatherKernel> gather_stub("gather");
DispatchStub<ScatterAddKernel> scatter_add_stub("scatter_add");
DispatchStub<CheckIndexValuesKernel> check_index_values_stub("check_index_values");

void check_index_values(const Tensor& idx, int64_t limit, bool has_ignore, int64_t ignore,
                        const std::function<std::string(int64_t)>& message) {
  check_index_values_stub(idx.device(), idx, limit, has_ignore, ignore, message);
}

namespace {

// A 1-D (or 0-dim) int64/int32 index on self's device, as contiguous int64.
Tensor vector_index(const char* op, const Tensor& self, const Tensor& index) {
  check_defined(op, index, "index");
  check_same_device(op, self, "self", index, "index");
  LOOM_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, op,
             ": expected an int64 or int32 index, got ", index.describe());
  LOOM_CHECK(index.dim() <= 1, op, ": index must be 1-D (or 0-dim), got ", index.describe());
  return contiguous(reshape(to(index, index.device(), kInt64), {index.numel()}));
}

// An int64 index of self's rank on self's device.
void check_nd_index(const char* op, const Tensor& self, const Tensor& index) {
  check_defined(op, index, "index");
  check_same_device(op, self, "self", index, "index");
  LOOM_CHECK(index.dtype() == kInt64, op, ": expected an int64 index, got ", index.describe());
  LOOM_CHECK(index.dim() == self.dim(), op,
             ": index tensor must have the same number of dimensions as self: index ",
             index.describe(), ", self ", self.describe());
}

// Rank-0 operands are handled as shape [1].
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? reshape(t, {1}) : t; }

void check_device(const char* op, const Tensor& t) {
  check_kernel_device(op, t);
}

}  // namespace

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  check_defined("index_select", self, "self");
  dim = wrap_dim(dim, self.dim(), "index_select");
  const Tensor idx = vector_index("index_select", self, index);
  if (self.dim() == 0) {
    LOOM_CHECK(idx.numel() == 1, "index_select: a 0-dim self takes exactly one index, got ",
               idx.numel());
    return reshape(index_select(reshape(self, {1}), 0, idx), {});
  }
  IntList sizes = self.sizes();
  sizes[dim] = idx.numel();
  Tensor out = empty(sizes, TensorOptions(self.dtype()).device(self.device()));
  check_device("index_select", self);
  index_select_stub(self.device(), out, contiguous(self), dim, idx);
  return out;
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  check_defined("index_add", self, "self");
  check_defined("index_add", source, "source");
  check_same_device("index_add", self, "self", source, "source");
  dim = wrap_dim(dim, self.dim(), "index_add");
  const Tensor idx = vector_index("index_add", self, index);
  LOOM_CHECK(source.dtype() == self.dtype(), "index_add: source ", source.describe(),
             " must have self's dtype ", dtype_name(self.dtype()));
  const Tensor s = at_least_1d(self), src = at_least_1d(source);
  IntList want = s.sizes();
  want[dim] = idx.numel();
  LOOM_CHECK(src.sizes() == want, "index_add: source ", source.describe(),
             " must have self's shape ", shape_str(self.sizes()), " except size ", idx.numel(),
             " (the number of indices) in dimension ", dim);
  // 16-bit floats accumulate in float32 and round once.
  const DType compute = compute_dtype(self.dtype());
  Tensor out = contiguous(to(s, s.device(), compute));
  if (out.storage().is_alias_of(s.storage())) out = clone(s);
  check_device("index_add", self);
  index_add_stub(self.device(), out, dim, idx, contiguous(to(src, src.device(), compute)));
  out = to(out, out.device(), self.dtype());
  return self.dim() == 0 ? reshape(out, {}) : out;
}

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  check_defined("gather", self, "self");
  dim = wrap_dim(dim, self.dim(), "gather");
  check_nd_index("gather", self, index);
  const Tensor s = at_least_1d(self), idx = at_least_1d(index);
  for (int64_t d = 0; d < s.dim(); ++d)
    LOOM_CHECK(d == dim || idx.sizes()[d] <= s.sizes()[d],
               "gather: size does not match at dimension ", d, ": expected index ",
               shape_str(index.sizes()), " to be no larger than self ", shape_str(self.sizes()),
               " apart from dimension ", dim);
  Tensor out = empty(idx.sizes(), TensorOptions(self.dtype()).device(self.device()));
  check_device("gather", self);
  gather_stub(self.device(), out, s, dim, contiguous(idx));
  return self.dim() == 0 ? reshape(out, {}) : out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined("scatter_add", self, "self");
  check_defined("scatter_add", src, "src");
  check_same_device("scatter_add", self, "self", src, "src");
  dim = wrap_dim(dim, self.dim(), "scatter_add");
  check_nd_index("scatter_add", self, index);
  LOOM_CHECK(src.dtype() == self.dtype(), "scatter_add: src ", src.describe(),
             " must have self's dtype ", dtype_name(self.dtype()));
  LOOM_CHECK(src.dim() == self.dim(), "scatter_add: src ", src.describe(),
             " must have as many dimensions as self ", self.describe());
  const Tensor s = at_least_1d(self), idx = at_least_1d(index), sr = at_least_1d(src);
  for (int64_t d = 0; d < s.dim(); ++d) {
    LOOM_CHECK(idx.sizes()[d] <= sr.sizes()[d], "scatter_add: expected index ",
               shape_str(index.sizes()), " to be no larger than src ", shape_str(src.sizes()),
               " in dimension ", d);
    LOOM_CHECK(d == dim || idx.sizes()[d] <= s.sizes()[d], "scatter_add: expected index ",
               shape_str(index.sizes()), " to be no larger than self ",
               shape_str(self.sizes()), " apart from dimension ", dim);
  }
  const DType compute = compute_dtype(self.dtype());
  Tensor out = contiguous(to(s, s.device(), compute));
  if (out.storage().is_alias_of(s.storage())) out = clone(s);
  check_device("scatter_add", self);
  scatter_add_stub(self.device(), out, dim, contiguous(idx), to(sr, sr.device(), compute));
  out = to(out, out.device(), self.dtype());
  return self.dim() == 0 ? reshape(out, {}) : out;
}

}  // namespace native
}  // namespace loom
