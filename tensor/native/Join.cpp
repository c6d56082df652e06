#include "tensor/native/Join.h"

#include <string>

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

DispatchStub<CatKernel> cat_stub("cat");

bool cat_skips(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  LOOM_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = "tensors[" + std::to_string(i) + "]";
    check_defined("cat", tensors[i], name.c_str());
    check_same_device("cat", tensors[0], "tensors[0]", tensors[i], name.c_str());
  }
  // The first tensor cat does not skip fixes the rank and the other dims.
  const Tensor* ref = nullptr;
  size_t ref_index = 0;
  DType dtype = tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    dtype = promote_types(dtype, tensors[i].dtype());
    if (!ref && !cat_skips(tensors[i])) {
      ref = &tensors[i];
      ref_index = i;
    }
  }
  const TensorOptions options = TensorOptions(dtype).device(tensors[0].device());
  if (!ref) return empty({0}, options);
  LOOM_CHECK(ref->dim() > 0, "cat: zero-dimensional tensor ", ref->describe(),
             " cannot be concatenated; unsqueeze it or use stack()");
  const int64_t rank = ref->dim();
  dim = wrap_dim(dim, rank, "cat");

  IntList out_sizes = ref->sizes();
  out_sizes[dim] = 0;
  check_kernel_device("cat", *ref);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (cat_skips(t)) continue;
    LOOM_CHECK(t.dim() == rank, "cat: tensors must have the same number of dimensions: got ",
               rank, " (tensors[", ref_index, "] ", ref->describe(), ") and ", t.dim(),
               " (tensors[", i, "] ", t.describe(), ")");
    for (int64_t d = 0; d < rank; ++d)
      LOOM_CHECK(d == dim || t.sizes()[d] == ref->sizes()[d],
                 "cat: sizes of tensors must match except in dimension ", dim,
                 ". Expected size ", ref->sizes()[d], " but got size ", t.sizes()[d],
                 " for tensor number ", i, " in the list (", t.describe(), ")");
    out_sizes[dim] += t.sizes()[dim];
    inputs.push_back(t);
  }
  Tensor out = empty(out_sizes, options);
  cat_stub(out.device(), out, inputs, dim);
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  LOOM_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  check_defined("stack", tensors[0], "tensors[0]");
  const IntList& shape = tensors[0].sizes();
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = "tensors[" + std::to_string(i) + "]";
    check_defined("stack", tensors[i], name.c_str());
    LOOM_CHECK(tensors[i].sizes() == shape,
               "stack: expects each tensor to be equal size, but got ", shape_str(shape),
               " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
    parts.push_back(unsqueeze(tensors[i], dim));
  }
  return cat(parts, dim);
}

}  // namespace native
}  // namespace loom
