#include "tensor/native/Views.h"

#include <algorithm>
#include <numeric>

#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace native {

Tensor as_strided(const Tensor& self, IntList sizes, IntList strides, int64_t storage_offset) {
  check_defined("as_strided", self, "self");
  LOOM_CHECK(sizes.size() == strides.size(), "as_strided: got ", sizes.size(), " sizes but ",
             strides.size(), " strides");
  int64_t max_offset = storage_offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    LOOM_CHECK(sizes[d] >= 0, "as_strided: negative size ", sizes[d], " in dim ", d);
    LOOM_CHECK(strides[d] >= 0, "as_strided: negative stride ", strides[d], " in dim ", d);
    if (sizes[d] == 0) max_offset = -1;
    if (max_offset >= 0) max_offset += (sizes[d] - 1) * strides[d];
  }
  const int64_t capacity =
      static_cast<int64_t>(self.storage().nbytes() / self.element_size());
  LOOM_CHECK(storage_offset >= 0 && max_offset < capacity, "as_strided: the view ",
             shape_str(sizes), " with strides ", shape_str(strides), " at offset ",
             storage_offset, " reaches element ", max_offset, " of a storage of ", capacity,
             " elements");
  auto impl = std::make_shared<TensorImpl>();
  const TensorImpl& src = *self.impl();
  impl->storage = src.storage;
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->storage_offset = storage_offset;
  impl->dtype = src.dtype;
  impl->device = src.device;
  impl->version = src.version;
  impl->view_base = src.view_base ? src.view_base : self.impl_ptr();
  return Tensor(impl);
}

IntList infer_size(IntList sizes, int64_t numel, const char* what) {
  int64_t known = 1;
  int64_t infer = -1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == -1) {
      LOOM_CHECK(infer < 0, what, ": only one dimension can be inferred (-1), got ",
                 shape_str(sizes));
      infer = static_cast<int64_t>(d);
    } else {
      LOOM_CHECK(sizes[d] >= 0, what, ": invalid size ", sizes[d], " in shape ",
                 shape_str(sizes));
      known *= sizes[d];
    }
  }
  if (infer >= 0) {
    LOOM_CHECK(known != 0 && numel % known == 0, what, ": shape ", shape_str(sizes),
               " is invalid for input of size ", numel);
    sizes[infer] = numel / known;
  } else {
    LOOM_CHECK(known == numel, what, ": shape ", shape_str(sizes),
               " is invalid for input of size ", numel);
  }
  return sizes;
}

namespace {

// Strides for viewing (old sizes, old strides) as new sizes without a copy, or
// nullopt-like empty result with ok=false (PyTorch's computeStride).
bool view_strides(const IntList& old_sizes, const IntList& old_strides, const IntList& sizes,
                  IntList& out) {
  out.assign(sizes.size(), 0);
  if (old_sizes.empty()) {
    std::fill(out.begin(), out.end(), 1);
    return true;
  }
  const int64_t numel = numel_of(old_sizes);
  if (numel == 0) {
    out = contiguous_strides(sizes);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];
    if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

}  // namespace

Tensor view(const Tensor& self, IntList sizes) {
  check_defined("view", self, "self");
  sizes = infer_size(std::move(sizes), self.numel(), "view");
  IntList strides;
  LOOM_CHECK(view_strides(self.sizes(), self.strides(), sizes, strides), "view: ",
             self.describe(), " with strides ", shape_str(self.strides()),
             " cannot be viewed as ", shape_str(sizes),
             " without a copy (its layout is not compatible); use reshape() or "
             "contiguous().view()");
  return as_strided(self, sizes, strides, self.storage_offset());
}

Tensor reshape(const Tensor& self, IntList sizes) {
  check_defined("reshape", self, "self");
  sizes = infer_size(std::move(sizes), self.numel(), "reshape");
  IntList strides;
  if (view_strides(self.sizes(), self.strides(), sizes, strides))
    return as_strided(self, sizes, strides, self.storage_offset());
  return view(clone(self), sizes);
}

Tensor permute(const Tensor& self, IntList dims) {
  check_defined("permute", self, "self");
  const int64_t rank = self.dim();
  LOOM_CHECK(static_cast<int64_t>(dims.size()) == rank, "permute: got ", dims.size(),
             " dims ", shape_str(dims), " for a tensor of ", rank, " dims");
  IntList sizes(rank), strides(rank);
  std::vector<bool> seen(rank, false);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = wrap_dim(dims[i], rank, "permute");
    LOOM_CHECK(!seen[d], "permute: dim ", d, " repeats in ", shape_str(dims));
    seen[d] = true;
    sizes[i] = self.sizes()[d];
    strides[i] = self.strides()[d];
  }
  return as_strided(self, sizes, strides, self.storage_offset());
}

Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  check_defined("transpose", self, "self");
  const int64_t rank = self.dim();
  dim0 = wrap_dim(dim0, rank, "transpose");
  dim1 = wrap_dim(dim1, rank, "transpose");
  if (rank == 0) return as_strided(self, {}, {}, self.storage_offset());
  IntList sizes = self.sizes(), strides = self.strides();
  std::swap(sizes[dim0], sizes[dim1]);
  std::swap(strides[dim0], strides[dim1]);
  return as_strided(self, sizes, strides, self.storage_offset());
}

Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  check_defined("narrow", self, "self");
  LOOM_CHECK(self.dim() > 0, "narrow: cannot narrow a 0-dimensional tensor");
  dim = wrap_dim(dim, self.dim(), "narrow");
  const int64_t size = self.sizes()[dim];
  if (start < 0) start += size;
  LOOM_CHECK(start >= 0 && length >= 0 && start + length <= size, "narrow: start (", start,
             ") + length (", length, ") exceeds dimension size (", size, ") of dim ", dim,
             " of ", self.describe());
  IntList sizes = self.sizes();
  sizes[dim] = length;
  return as_strided(self, sizes, self.strides(),
                    self.storage_offset() + start * self.strides()[dim]);
}

Tensor select(const Tensor& self, int64_t dim, int64_t index) {
  check_defined("select", self, "self");
  LOOM_CHECK(self.dim() > 0, "select: cannot select from a 0-dimensional tensor");
  dim = wrap_dim(dim, self.dim(), "select");
  const int64_t size = self.sizes()[dim];
  LOOM_CHECK(index >= -size && index < size, "select: index ", index,
             " is out of bounds for dimension ", dim, " with size ", size);
  if (index < 0) index += size;
  IntList sizes = self.sizes(), strides = self.strides();
  const int64_t offset = self.storage_offset() + index * strides[dim];
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return as_strided(self, sizes, strides, offset);
}

Tensor slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step) {
  check_defined("slice", self, "self");
  LOOM_CHECK(self.dim() > 0, "slice: cannot slice a 0-dimensional tensor");
  LOOM_CHECK(step > 0, "slice: step must be positive, got ", step);
  dim = wrap_dim(dim, self.dim(), "slice");
  const int64_t size = self.sizes()[dim];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  IntList sizes = self.sizes(), strides = self.strides();
  sizes[dim] = (end - start + step - 1) / step;
  const int64_t offset = self.storage_offset() + start * strides[dim];
  strides[dim] *= step;
  return as_strided(self, sizes, strides, offset);
}

Tensor expand(const Tensor& self, IntList sizes) {
  check_defined("expand", self, "self");
  const int64_t rank = self.dim();
  const int64_t n = static_cast<int64_t>(sizes.size());
  LOOM_CHECK(n >= rank, "expand: the number of sizes provided (", n,
             ") must be greater or equal to the number of dimensions in the tensor (", rank,
             ")");
  IntList strides(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t d = i - (n - rank);
    if (d < 0) {
      LOOM_CHECK(sizes[i] >= 0, "expand: size ", sizes[i], " is invalid for a new leading dim");
      strides[i] = 0;
      continue;
    }
    const int64_t have = self.sizes()[d];
    if (sizes[i] == -1) sizes[i] = have;
    LOOM_CHECK(have == sizes[i] || have == 1, "expand: the expanded size of the tensor (",
               sizes[i], ") must match the existing size (", have,
               ") at non-singleton dimension ", i, ".  Target sizes: ", shape_str(sizes),
               ".  Tensor sizes: ", shape_str(self.sizes()));
    strides[i] = have == sizes[i] ? self.strides()[d] : 0;
  }
  return as_strided(self, sizes, strides, self.storage_offset());
}

Tensor squeeze(const Tensor& self) {
  check_defined("squeeze", self, "self");
  IntList sizes, strides;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (self.sizes()[d] == 1) continue;
    sizes.push_back(self.sizes()[d]);
    strides.push_back(self.strides()[d]);
  }
  return as_strided(self, sizes, strides, self.storage_offset());
}

Tensor squeeze(const Tensor& self, int64_t dim) {
  check_defined("squeeze", self, "self");
  dim = wrap_dim(dim, self.dim(), "squeeze");
  if (self.dim() == 0) return as_strided(self, {}, {}, self.storage_offset());
  IntList sizes = self.sizes(), strides = self.strides();
  if (sizes[dim] != 1) return as_strided(self, sizes, strides, self.storage_offset());
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return as_strided(self, sizes, strides, self.storage_offset());
}

Tensor unsqueeze(const Tensor& self, int64_t dim) {
  check_defined("unsqueeze", self, "self");
  dim = wrap_dim(dim, self.dim() + 1, "unsqueeze");
  IntList sizes = self.sizes(), strides = self.strides();
  const int64_t stride = dim < self.dim() ? sizes[dim] * strides[dim] : 1;
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  return as_strided(self, sizes, strides, self.storage_offset());
}

Tensor flatten(const Tensor& self, int64_t start_dim, int64_t end_dim) {
  check_defined("flatten", self, "self");
  start_dim = wrap_dim(start_dim, self.dim(), "flatten");
  end_dim = wrap_dim(end_dim, self.dim(), "flatten");
  if (self.dim() == 0) return reshape(self, {1});
  LOOM_CHECK(start_dim <= end_dim, "flatten: start_dim (", start_dim,
             ") cannot come after end_dim (", end_dim, ")");
  IntList sizes;
  for (int64_t d = 0; d < start_dim; ++d) sizes.push_back(self.sizes()[d]);
  int64_t merged = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) merged *= self.sizes()[d];
  sizes.push_back(merged);
  for (int64_t d = end_dim + 1; d < self.dim(); ++d) sizes.push_back(self.sizes()[d]);
  return reshape(self, sizes);
}

}  // namespace native
}  // namespace loom
