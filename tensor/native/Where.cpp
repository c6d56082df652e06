#include "tensor/native/Where.h"

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

DispatchStub<WhereKernel> where_stub("where");

Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  check_defined("where", condition, "condition");
  check_defined("where", self, "self");
  check_defined("where", other, "other");
  LOOM_CHECK(condition.dtype() == kBool, "where: expected condition to be a bool tensor, got ",
             condition.describe(), "; build it with a comparison such as x.gt(0)");
  check_same_device("where", condition, "condition", self, "self");
  check_same_device("where", self, "self", other, "other");
  const IntList shape = broadcast_shapes(
      broadcast_shapes(condition.sizes(), self.sizes(), "where"), other.sizes(), "where");
  const DType dtype = promoted_dtype(self, other);
  check_kernel_device("where", condition);
  Tensor out = empty(shape, TensorOptions(dtype).device(self.device()));
  const Tensor c = expand_to(condition, shape);
  const Tensor a = expand_to(to(self, self.device(), dtype), shape);
  const Tensor b = expand_to(to(other, other.device(), dtype), shape);
  where_stub(out.device(), out, c, a, b);
  return out;
}

}  // namespace native
}  // namespace loom
