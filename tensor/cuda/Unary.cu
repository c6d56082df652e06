// CUDA kernels for native::unary / unary_, pow with a scalar exponent and
// clamp (see Elementwise.h).  The unary ops' per-element rules are the
// table's (tensor/native/UnaryOps.h), the same functors the CPU runs,
// instantiated for the dtypes each op's rule allows; pow and clamp keep the
// CPU kernel's special cases so both round alike.
#include <cmath>
#include <limits>
#include <type_traits>

#include "tensor/cuda/Loops.cuh"
#include "tensor/native/UnaryOps.h"

namespace loom {
namespace cuda {
namespace {

using native::UnaryOp;

// Op::forward of the unary table as a device functor.
template <typename Op, typename T>
struct ForwardF {
  Op op;
  __device__ T operator()(T x) const { return op.template forward<T>(x); }
};

// A 16-bit S out = Op::forward in float32 of the widened input, rounded
// once, as the float32 path's copies would give.
template <typename Op, typename S>
struct Forward16F {
  Op op;
  __device__ S operator()(S x) const {
    return S(op.template forward<float>(static_cast<float>(x)));
  }
};

template <typename T>
struct PowScalarF {
  T e;
  __device__ T operator()(T x) const { return ::pow(x, e); }
};
template <typename T>
struct SquareF {
  __device__ T operator()(T x) const { return static_cast<T>(x * x); }
};
template <typename T>
struct CubeF {
  __device__ T operator()(T x) const { return x * x * x; }
};
template <typename T>
struct ReciprocalF {
  __device__ T operator()(T x) const { return T(1) / x; }
};
template <typename T>
struct IntPowF {
  int64_t e;  // >= 0
  __device__ T operator()(T x) const {
    T r = 1;
    for (int64_t k = e; k > 0; k >>= 1) {
      if (k & 1) r = static_cast<T>(r * x);
      x = static_cast<T>(x * x);
    }
    return r;
  }
};

template <typename T>
struct ClampF {
  T lo, hi;
  // nan fails both comparisons and passes through; lo > hi gives hi.
  __device__ T operator()(T x) const {
    const T y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};

// A double bound as T, saturated to T's range (clamp(uint8, -5) is a no-op).
template <typename T>
T saturate(double v) {
  if constexpr (std::is_floating_point<T>::value) {
    return static_cast<T>(v);
  } else {
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

struct Launch {
  const ElementwiseLayout& layout;
  void* out;
  const void* in;
  int device;
  uint64_t stream;

  template <typename T, typename F>
  void run(F f) const {
    loops::map1<T, T>(layout, out, in, f, device, stream);
  }
};

}  // namespace

void unary(UnaryOp id, const optable::UnaryArgs& args, DType dtype, const ElementwiseLayout& layout,
           void* out, const void* in, int device, uint64_t stream) {
  const Launch l{layout, out, in, device, stream};
  native::visit_unary_op(id, [&](auto op_tag) {
    using Op = typename decltype(op_tag)::type;
    const Op op = optable::make_op<Op>(args);
    if (dtype == kFloat16 || dtype == kBFloat16) {
      if constexpr (optable::unary_accepts<Op, float>()) {
        if (dtype == kFloat16) return l.run<Half>(Forward16F<Op, Half>{op});
        return l.run<BFloat16>(Forward16F<Op, BFloat16>{op});
      } else {
        LOOM_FAIL("cuda::unary: ", Op::name, " has no kernel for ", dtype_name(dtype));
      }
    }
    dispatch_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (optable::unary_accepts<Op, T>()) {
        l.run<T>(ForwardF<Op, T>{op});
      } else {
        LOOM_FAIL("cuda::unary: ", Op::name, " has no kernel for ", dtype_name(dtype));
      }
    });
  });
}

void pow_scalar(DType dtype, const ElementwiseLayout& layout, void* out, const void* in,
                double e, int device, uint64_t stream) {
  const Launch l{layout, out, in, device, stream};
  dispatch_numeric(dtype, "cuda::pow_scalar", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point<T>::value) {
      // The CPU kernel's shortcuts, so both give the same rounding.
      if (e == 2) return l.run<T>(SquareF<T>{});
      if (e == 3) return l.run<T>(CubeF<T>{});
      if (e == -1) return l.run<T>(ReciprocalF<T>{});
      if (e == 0.5) return l.run<T>(ForwardF<optable::Sqrt, T>{});
      if (e == -0.5) return l.run<T>(ForwardF<optable::Rsqrt, T>{});
      l.run<T>(PowScalarF<T>{static_cast<T>(e)});
    } else {
      LOOM_CHECK(e >= 0, "cuda::pow_scalar: negative integer exponent ", e);
      l.run<T>(IntPowF<T>{static_cast<int64_t>(e)});
    }
  });
}

void clamp(DType dtype, const ElementwiseLayout& layout, void* out, const void* in, bool has_min,
           double min, bool has_max, double max, int device, uint64_t stream) {
  const Launch l{layout, out, in, device, stream};
  dispatch_numeric(dtype, "cuda::clamp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr bool fp = std::is_floating_point<T>::value;
    // An absent bound is the type's extreme (infinity for floats, so
    // infinities and nan pass through unchanged).
    const T lowest = fp ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    const T highest = fp ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
    l.run<T>(ClampF<T>{has_min ? saturate<T>(min) : lowest, has_max ? saturate<T>(max) : highest});
  });
}

}  // namespace cuda
}  // namespace loom
