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

// A 16-bit S out from operands of A and B (each S or float32, the latter a
// scalar beside S tensors): Op::forward in float32, rounded once into S, as
// the float32 path's copies would give.
template <typename Op, typename S, typename A, typename B>
struct Forward16F {
  Op op;
  __device__ S operator()(A x, B y) const {
    return S(op.template forward<float>(static_cast<float>(x), static_cast<float>(y)));
  }
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

void binary_16bit(BinaryOp id, DType out_dtype, DType a_dtype, DType b_dtype,
                  const ElementwiseLayout& layout, void* out, const void* a, const void* b,
                  double alpha, int device, uint64_t stream) {
  const auto operand = [&](DType d, const char* which) {
    LOOM_CHECK(d == out_dtype || d == kFloat32, "cuda::binary_16bit: operand ", which, " is ",
               dtype_name(d), " beside a ", dtype_name(out_dtype), " result (expected ",
               dtype_name(out_dtype), " or float32)");
  };
  operand(a_dtype, "a");
  operand(b_dtype, "b");
  native::visit_binary_op(id, [&](auto op_tag) {
    using Op = typename decltype(op_tag)::type;
    if constexpr (optable::binary_accepts<Op, float>()) {
      const Op op = optable::make_op<Op>(optable::BinaryArgs{alpha});
      const auto launch = [&](auto s_tag) {
        using S = typename decltype(s_tag)::type;
        const bool a16 = a_dtype != kFloat32, b16 = b_dtype != kFloat32;
        if (a16 && b16)
          loops::map2<S, S, S>(layout, out, a, b, Forward16F<Op, S, S, S>{op}, device, stream);
        else if (a16)
          loops::map2<S, S, float>(layout, out, a, b, Forward16F<Op, S, S, float>{op}, device,
                                   stream);
        else if (b16)
          loops::map2<S, float, S>(layout, out, a, b, Forward16F<Op, S, float, S>{op}, device,
                                   stream);
        else
          loops::map2<S, float, float>(layout, out, a, b, Forward16F<Op, S, float, float>{op},
                                       device, stream);
      };
      if (out_dtype == kFloat16) return launch(TypeTag<Half>{});
      if (out_dtype == kBFloat16) return launch(TypeTag<BFloat16>{});
      LOOM_FAIL("cuda::binary_16bit: ", dtype_name(out_dtype), " is not a 16-bit float");
    } else {
      LOOM_FAIL("cuda::binary: ", Op::name, " has no kernel for ", dtype_name(out_dtype));
    }
  });
}

void isclose(const ElementwiseLayout& layout, void* out, const void* a, const void* b,
             double rtol, double atol, int device, uint64_t stream) {
  loops::map2<bool, double, double>(layout, out, a, b, IsCloseF{rtol, atol}, device, stream);
}

}  // namespace cuda
}  // namespace loom
