// CUDA kernels for native::unary / unary_, pow with a scalar exponent and
// clamp (see Elementwise.h).  The per-element rules are the CPU kernel's
// (tensor/cpu/Unary.cpp): the transcendental ops only for float32/float64
// (the native layer converts integers first), neg/abs/sign/relu for every
// numeric dtype, sign the identity on bool; relu and clamp let nan through.
#include <cmath>
#include <limits>
#include <type_traits>

#include "tensor/cuda/Loops.cuh"
#include "tensor/native/Unary.h"

namespace loom {
namespace cuda {
namespace {

using native::UnaryOp;

template <typename T>
struct NegF {
  __device__ T operator()(T x) const { return static_cast<T>(-x); }
};
template <typename T>
struct AbsF {
  __device__ T operator()(T x) const {
    if constexpr (std::is_floating_point<T>::value) return ::fabs(x);
    else if constexpr (std::is_unsigned<T>::value) return x;
    else return x < T(0) ? static_cast<T>(-x) : x;
  }
};
// -1, 0 or 1; nan gives 0 (both comparisons fail), as on the CPU.
template <typename T>
struct SignF {
  __device__ T operator()(T x) const {
    if constexpr (std::is_unsigned<T>::value) return static_cast<T>(x > 0);
    else return static_cast<T>((T(0) < x) - (x < T(0)));
  }
};
template <typename T>
struct ReluF {
  __device__ T operator()(T x) const {
    if constexpr (std::is_unsigned<T>::value) return x;
    else return x < T(0) ? T(0) : x;
  }
};
template <typename T>
struct ExpF {
  __device__ T operator()(T x) const { return ::exp(x); }
};
template <typename T>
struct LogF {
  __device__ T operator()(T x) const { return ::log(x); }
};
template <typename T>
struct SqrtF {
  __device__ T operator()(T x) const { return ::sqrt(x); }
};
template <typename T>
struct RsqrtF {
  __device__ T operator()(T x) const { return T(1) / ::sqrt(x); }
};
template <typename T>
struct SigmoidF {
  __device__ T operator()(T x) const { return T(1) / (T(1) + ::exp(-x)); }
};
template <typename T>
struct TanhF {
  __device__ T operator()(T x) const { return ::tanh(x); }
};
struct IdentityF {
  __device__ bool operator()(bool x) const { return x; }
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

template <typename T>
void floating_unary(UnaryOp op, const Launch& l) {
  switch (op) {
    case UnaryOp::kNeg: return l.run<T>(NegF<T>{});
    case UnaryOp::kAbs: return l.run<T>(AbsF<T>{});
    case UnaryOp::kSign: return l.run<T>(SignF<T>{});
    case UnaryOp::kRelu: return l.run<T>(ReluF<T>{});
    case UnaryOp::kExp: return l.run<T>(ExpF<T>{});
    case UnaryOp::kLog: return l.run<T>(LogF<T>{});
    case UnaryOp::kSqrt: return l.run<T>(SqrtF<T>{});
    case UnaryOp::kRsqrt: return l.run<T>(RsqrtF<T>{});
    case UnaryOp::kSigmoid: return l.run<T>(SigmoidF<T>{});
    case UnaryOp::kTanh: return l.run<T>(TanhF<T>{});
  }
  LOOM_FAIL("cuda::unary: unknown op ", static_cast<int>(op));
}

template <typename T>
void integral_unary(UnaryOp op, const Launch& l) {
  switch (op) {
    case UnaryOp::kNeg: return l.run<T>(NegF<T>{});
    case UnaryOp::kAbs: return l.run<T>(AbsF<T>{});
    case UnaryOp::kSign: return l.run<T>(SignF<T>{});
    case UnaryOp::kRelu: return l.run<T>(ReluF<T>{});
    default: break;
  }
  LOOM_FAIL("cuda::unary: ", native::unary_op_name(op), " expects a floating tensor");
}

}  // namespace

void unary(UnaryOp op, DType dtype, const ElementwiseLayout& layout, void* out, const void* in,
           int device, uint64_t stream) {
  const Launch l{layout, out, in, device, stream};
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point<T>::value) {
      floating_unary<T>(op, l);
    } else if constexpr (std::is_same<T, bool>::value) {
      LOOM_CHECK(op == UnaryOp::kSign, "cuda::unary: ", native::unary_op_name(op),
                 " is not supported for bool tensors");
      l.run<bool>(IdentityF{});
    } else {
      integral_unary<T>(op, l);
    }
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
      if (e == 0.5) return l.run<T>(SqrtF<T>{});
      if (e == -0.5) return l.run<T>(RsqrtF<T>{});
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
