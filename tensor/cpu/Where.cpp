// CPU kernel for native::where: one select per element.  A broadcast-scalar
// branch (where(c, x, 0)) is captured as a constant.
#include "tensor/cpu/DenseLoops.h"
#include "tensor/native/Where.h"

namespace loom {
namespace cpu {

void where_kernel(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  dispatch_all_dtypes(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // bool is read as a byte so the select vectorises.
    using Cond = uint8_t;
    static_assert(sizeof(bool) == sizeof(Cond), "bool is one byte");
    const Tensor c = condition;
    if (is_broadcast_scalar(b) && !is_broadcast_scalar(a)) {
      const T y = *static_cast<const T*>(b.data_ptr());
      return simd_map<T, Cond, T>(out, c, a, [y](Cond k, T x) { return k ? x : y; });
    }
    if (is_broadcast_scalar(a) && !is_broadcast_scalar(b)) {
      const T x = *static_cast<const T*>(a.data_ptr());
      return simd_map<T, Cond, T>(out, c, b, [x](Cond k, T y) { return k ? x : y; });
    }
    simd_map<T, Cond, T, T>(out, c, a, b, [](Cond k, T x, T y) { return k ? x : y; });
  });
}

static const native::RegisterKernel reg_where(native::where_stub, kCPU, &where_kernel);

}  // namespace cpu
}  // namespace loom
