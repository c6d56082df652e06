// CPU kernel for native::where: one select per element over cpu::map.
#include "tensor/cpu/Loops.h"
#include "tensor/native/Where.h"

namespace loom {
namespace cpu {

void where_kernel(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    map<T, bool, T, T>(out, {&condition, &a, &b}, [](bool c, T x, T y) { return c ? x : y; });
  });
}

}  // namespace cpu
}  // namespace loom
