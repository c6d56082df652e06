// CUDA dtype conversion: one elementwise kernel per (out, in) dtype pair, on
// the shared loops of Loops.cuh (vectorised when dense, offset calculator
// otherwise), so a CUDA-to-CUDA copy that changes dtype never leaves the
// device.  Values convert as the CPU's static_cast<Out>(in) does on x86:
// floating to uint8/int32 truncates to int64 first and keeps the low bits
// (the CPU's cvttss2si result for values in range; CUDA's direct conversion
// would saturate instead), floating to bool is "!= 0" (nan is true).  float16 and bfloat16 go
// through float (tensor/Half.h), as on the CPU.
#include <type_traits>

#include "tensor/cuda/Elementwise.h"
#include "tensor/cuda/Loops.cuh"

namespace loom {
namespace cuda {
namespace {

// float16 and bfloat16 convert through float, as the floating types do.
template <typename T>
struct is_float_like
    : std::integral_constant<bool, std::is_floating_point<T>::value ||
                                       std::is_same<T, Half>::value ||
                                       std::is_same<T, BFloat16>::value> {};

template <typename Out, typename In>
struct Cast {
  __device__ Out operator()(In v) const {
    if constexpr (std::is_same<Out, bool>::value) {
      return v != In(0);
    } else if constexpr (is_float_like<In>::value && std::is_integral<Out>::value &&
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
  dispatch_all_dtypes(out_dtype, [&](auto otag) {
    using Out = typename decltype(otag)::type;
    dispatch_all_dtypes(in_dtype, [&](auto itag) {
      using In = typename decltype(itag)::type;
      loops::map1<Out, In>(layout, out, in, Cast<Out, In>(), device, stream);
    });
  });
}

}  // namespace cuda
}  // namespace loom
