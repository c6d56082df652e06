// CUDA dtype conversion: one elementwise kernel per (out, in) dtype pair, on
// the shared loops of Loops.cuh (vectorised when dense, offset calculator
// otherwise), so a CUDA-to-CUDA copy that changes dtype never leaves the
// device.  Values convert as the CPU's static_cast<Out>(in) does on x86:
// floating to uint8/int32 truncates to int64 first and keeps the low bits
// (the CPU's cvttss2si result for values in range; CUDA's direct conversion
// would saturate instead), floating to bool is "!= 0" (nan is true).
#include <type_traits>

#include "tensor/cuda/Elementwise.h"
#include "tensor/cuda/Loops.cuh"

namespace loom {
namespace cuda {
namespace {

template <typename Out, typename In>
struct Cast {
  __device__ Out operator()(In v) const {
    if constexpr (std::is_same<Out, bool>::value) {
      return v != In(0);
    } else if constexpr (std::is_floating_point<In>::value && std::is_integral<Out>::value &&
                         sizeof(Out) < sizeof(int64_t)) {
      return static_cast<Out>(static_cast<int64_t>(v));
    } else {
      return static_cast<Out>(v);
    }
  }
};

}  // namespace

void convert(DType out_dtype, DType in_dtype, const ElementwiseLayout& layout, void* out,
             const void* in, int device, uint64_t stream) {
  dispatch_dtype(out_dtype, [&](auto otag) {
    using Out = typename decltype(otag)::type;
    dispatch_dtype(in_dtype, [&](auto itag) {
      using In = typename decltype(itag)::type;
      loops::map1<Out, In>(layout, out, in, Cast<Out, In>(), device, stream);
    });
  });
}

}  // namespace cuda
}  // namespace loom
