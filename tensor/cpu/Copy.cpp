// CPU kernels for native::copy_ and fill_: both tensors on CPU logical
// devices (any of them), converted element by element where dtypes differ.
#include <cstring>

#include "tensor/cpu/Loops.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace cpu {
namespace {

void copy_kernel(const Tensor& dst, const Tensor& src, bool /*non_blocking*/) {
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() &&
      dst.sizes() == src.sizes()) {
    if (dst.nbytes() > 0) std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  dispatch_all_dtypes(dst.dtype(), [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    dispatch_all_dtypes(src.dtype(), [&](auto stag) {
      using S = typename decltype(stag)::type;
      map<D, S>(dst, {&src}, [](S v) { return static_cast<D>(v); });
    });
  });
}

void fill_kernel(const Tensor& t, Scalar value) {
  dispatch_all_dtypes(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = static_cast<T>(value.to_double());
    map<T>(t, {}, [v]() { return v; });
  });
}

}  // namespace

static const native::RegisterKernel reg_copy(native::copy_stub, kCPU, &copy_kernel);
static const native::RegisterKernel reg_fill(native::fill_stub, kCPU, &fill_kernel);

}  // namespace cpu
}  // namespace loom
