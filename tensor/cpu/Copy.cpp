// CPU kernels for native::copy_ and fill_: both tensors on CPU logical
// devices (any of them), converted element by element where dtypes differ.
#include <cstdint>
#include <cstring>

#include "tensor/Parallel.h"
#include "tensor/cpu/Bfloat16Runs.h"
#include "tensor/cpu/Loops.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace cpu {
namespace {

// run(src, dst, n) over n contiguous values, split across the intra-op
// threads: the float32 <-> bfloat16 copies (autocast converts every
// activation it hands a bfloat16 kernel) in Bfloat16Runs.h's vectorised loops.
template <typename S, typename D>
void convert_parallel(const void* src, void* dst, int64_t n, void (*run)(const S*, D*, int64_t)) {
  const S* s = static_cast<const S*>(src);
  D* d = static_cast<D*>(dst);
  parallel_for(0, n, kElementwiseGrain,
               [&](int64_t begin, int64_t end) { run(s + begin, d + begin, end - begin); });
}

// Whether dst and src are one dense block each with the same strides
// (contiguous, or channels last in both): then element i of one is element
// i of the other in memory order, and the copy runs over flat memory.
bool same_dense_layout(const Tensor& dst, const Tensor& src) {
  if (dst.sizes() != src.sizes() || dst.strides() != src.strides()) return false;
  return dst.is_contiguous() || dst.is_contiguous(MemoryFormat::kChannelsLast);
}

void copy_kernel(const Tensor& dst, const Tensor& src, bool /*non_blocking*/) {
  const bool dense = same_dense_layout(dst, src);
  if (dst.dtype() == src.dtype() && dense) {
    if (dst.nbytes() > 0) std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  if (dense && dst.dtype() == kBFloat16 && src.dtype() == kFloat32)
    return convert_parallel(src.data_ptr(), dst.data_ptr(), dst.numel(), &narrow_to_bfloat16);
  if (dense && dst.dtype() == kFloat32 && src.dtype() == kBFloat16)
    return convert_parallel(src.data_ptr(), dst.data_ptr(), dst.numel(), &widen_bfloat16);
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
