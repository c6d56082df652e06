#include "tensor/native/Reduce.h"

#include "tensor/Factory.h"
#include "tensor/Parallel.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

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
  LOOM_CHECK(self.is_cpu(), "sum: ", self.device(), " needs the CUDA backend");
  const std::vector<bool> mask = dim_mask(dims, self.dim(), "sum");
  const DType out_dtype = is_floating_point(self.dtype()) ? self.dtype() : kInt64;
  Tensor out = empty(reduced_shape(self.sizes(), mask, keepdim), TensorOptions(out_dtype).device(self.device()));
  int64_t outer, inner;
  const Tensor src = reduction_layout(self, mask, outer, inner);
  dispatch_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    using Out = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    const T* in = static_cast<const T*>(src.data_ptr());
    Out* o = static_cast<Out*>(out.data_ptr());
    parallel_for(0, outer, std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t i = b; i < e; ++i) {
                     Acc acc = 0;
                     const T* row = in + i * inner;
                     for (int64_t j = 0; j < inner; ++j) acc += static_cast<Acc>(row[j]);
                     o[i] = static_cast<Out>(acc);
                   }
                 });
  });
  return out;
}

}  // namespace native
}  // namespace loom
