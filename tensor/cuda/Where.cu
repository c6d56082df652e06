// CUDA kernel for native::where (see Elementwise.h): one select per element,
// for every dtype.  The condition is read as bool; a broadcast branch
// (where(c, x, 0)) is one value the dense loop reads once per pack.
#include "tensor/cuda/Loops.cuh"

namespace loom {
namespace cuda {
namespace {

template <typename T>
struct SelectF {
  __device__ T operator()(bool c, T x, T y) const { return c ? x : y; }
};

}  // namespace

void where(DType dtype, const ElementwiseLayout& layout, void* out, const void* condition,
           const void* a, const void* b, int device, uint64_t stream) {
  dispatch_all_dtypes(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    loops::map3<T, bool, T, T>(layout, out, condition, a, b, SelectF<T>{}, device, stream);
  });
}

}  // namespace cuda
}  // namespace loom
