// CUDA kernels for native::binary / binary_ and isclose (see Elementwise.h).
//
// The binary table's functors (tensor/native/BinaryOps.h), the same the CPU
// runs, instantiated only for the dtypes each op's rule allows: arithmetic
// for the numeric dtypes (div for the floating ones: the native layer
// computes integer division in float32), comparisons for all six, and
// bool's logical mul/maximum/minimum.
#include <type_traits>

#include "tensor/cuda/Loops.cuh"
#include "tensor/native/BinaryOps.h"

namespace loom {
namespace cuda {
namespace {

using native::BinaryOp;

// Op::forward of the binary table as a device functor (Out is bool for the
// comparisons, T otherwise).
template <typename Op, typename Out, typename T>
struct ForwardF {
  Op op;
  __device__ Out operator()(T x, T y) const { return op.template forward<T>(x, y); }
};

struct IsCloseF {
  double rtol, atol;
  __device__ bool operator()(double x, double y) const {
    if (x == y) return true;  // equal infinities too
    return isfinite(x) && isfinite(y) && fabs(x - y) <= atol + rtol * fabs(y);
  }
};

struct Launch {
  const ElementwiseLayout& layout;
  void* out;
  const void* a;
  const void* b;
  int device;
  uint64_t stream;

  template <typename Out, typename T, typename F>
  void run(F f) const {
    loops::map2<Out, T, T>(layout, out, a, b, f, device, stream);
  }
};

}  // namespace

void binary(BinaryOp id, DType dtype, const ElementwiseLayout& layout, void* out, const void* a,
            const void* b, double alpha, int device, uint64_t stream) {
  const Launch l{layout, out, a, b, device, stream};
  native::visit_binary_op(id, [&](auto op_tag) {
    using Op = typename decltype(op_tag)::type;
    const Op op = optable::make_op<Op>(optable::BinaryArgs{alpha});
    dispatch_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (optable::binary_accepts<Op, T>()) {
        using Out = decltype(op.template forward<T>(T(), T()));
        l.run<Out, T>(ForwardF<Op, Out, T>{op});
      } else {
        LOOM_FAIL("cuda::binary: ", Op::name, " has no kernel for ", dtype_name(dtype));
      }
    });
  });
}

void isclose(const ElementwiseLayout& layout, void* out, const void* a, const void* b,
             double rtol, double atol, int device, uint64_t stream) {
  loops::map2<bool, double, double>(layout, out, a, b, IsCloseF{rtol, atol}, device, stream);
}

}  // namespace cuda
}  // namespace loom
