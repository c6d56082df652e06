// CUDA kernels for native::binary / binary_ and isclose (see Elementwise.h).
//
// One functor per op, instantiated only for the dtypes the op can receive:
// arithmetic for the five numeric dtypes (div for the floating ones: the
// native layer computes integer division in float32), comparisons for all
// six, and bool's logical mul/maximum/minimum.  The per-element rules are the
// CPU kernel's (tensor/cpu/Binary.cpp): integer pow by squaring with the same
// negative-exponent rule, and nan wins maximum/minimum.
#include <type_traits>

#include "tensor/cuda/Loops.cuh"
#include "tensor/native/Binary.h"

namespace loom {
namespace cuda {
namespace {

using native::BinaryOp;

template <typename T>
struct AddF {
  T alpha;
  __device__ T operator()(T x, T y) const { return static_cast<T>(x + alpha * y); }
};
template <typename T>
struct SubF {
  T alpha;
  __device__ T operator()(T x, T y) const { return static_cast<T>(x - alpha * y); }
};
template <typename T>
struct MulF {
  __device__ T operator()(T x, T y) const { return static_cast<T>(x * y); }
};
template <typename T>
struct DivF {
  __device__ T operator()(T x, T y) const { return x / y; }
};

template <typename T>
struct PowF {
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_floating_point<T>::value) {
      return ::pow(a, b);
    } else {
      // As the CPU kernel: a negative exponent truncates 1 / a^|b| toward 0.
      if constexpr (std::is_signed<T>::value) {
        if (b < 0) {
          if (a == 1) return 1;
          if (a == -1) return (b % 2 == 0) ? 1 : -1;
          return 0;
        }
      }
      T r = 1;
      while (b > 0) {
        if (b & 1) r = static_cast<T>(r * a);
        a = static_cast<T>(a * a);
        b >>= 1;
      }
      return r;
    }
  }
};

// nan wins, as in PyTorch (x != x only for nan).
template <typename T>
struct MaximumF {
  __device__ T operator()(T x, T y) const { return x > y || x != x ? x : y; }
};
template <typename T>
struct MinimumF {
  __device__ T operator()(T x, T y) const { return x < y || x != x ? x : y; }
};

struct OrF {
  __device__ bool operator()(bool x, bool y) const { return x || y; }
};
struct AndF {
  __device__ bool operator()(bool x, bool y) const { return x && y; }
};

template <typename T>
struct EqF {
  __device__ bool operator()(T x, T y) const { return x == y; }
};
template <typename T>
struct NeF {
  __device__ bool operator()(T x, T y) const { return x != y; }
};
template <typename T>
struct LtF {
  __device__ bool operator()(T x, T y) const { return x < y; }
};
template <typename T>
struct LeF {
  __device__ bool operator()(T x, T y) const { return x <= y; }
};
template <typename T>
struct GtF {
  __device__ bool operator()(T x, T y) const { return x > y; }
};
template <typename T>
struct GeF {
  __device__ bool operator()(T x, T y) const { return x >= y; }
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

template <typename T>
void comparison(BinaryOp op, const Launch& l) {
  switch (op) {
    case BinaryOp::kEq: return l.run<bool, T>(EqF<T>{});
    case BinaryOp::kNe: return l.run<bool, T>(NeF<T>{});
    case BinaryOp::kLt: return l.run<bool, T>(LtF<T>{});
    case BinaryOp::kLe: return l.run<bool, T>(LeF<T>{});
    case BinaryOp::kGt: return l.run<bool, T>(GtF<T>{});
    case BinaryOp::kGe: return l.run<bool, T>(GeF<T>{});
    default: break;
  }
  LOOM_FAIL("cuda::binary: ", native::binary_op_name(op), " is not a comparison");
}

template <typename T>
void arithmetic(BinaryOp op, const Launch& l, double alpha) {
  const T a = static_cast<T>(alpha);
  switch (op) {
    case BinaryOp::kAdd: return l.run<T, T>(AddF<T>{a});
    case BinaryOp::kSub: return l.run<T, T>(SubF<T>{a});
    case BinaryOp::kMul: return l.run<T, T>(MulF<T>{});
    case BinaryOp::kDiv:
      if constexpr (std::is_floating_point<T>::value) return l.run<T, T>(DivF<T>{});
      break;
    case BinaryOp::kPow: return l.run<T, T>(PowF<T>{});
    case BinaryOp::kMaximum: return l.run<T, T>(MaximumF<T>{});
    case BinaryOp::kMinimum: return l.run<T, T>(MinimumF<T>{});
    default: break;
  }
  LOOM_FAIL("cuda::binary: no kernel for ", native::binary_op_name(op), " on dtype ",
            static_cast<int>(dtype_of<T>()));
}

}  // namespace

void binary(BinaryOp op, DType dtype, const ElementwiseLayout& layout, void* out, const void* a,
            const void* b, double alpha, int device, uint64_t stream) {
  const Launch l{layout, out, a, b, device, stream};
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (native::is_comparison(op)) return comparison<T>(op, l);
    if constexpr (std::is_same<T, bool>::value) {
      // Only mul/maximum/minimum reach here for bool: logical and/or.
      if (op == BinaryOp::kMaximum) return l.run<bool, bool>(OrF{});
      if (op == BinaryOp::kMul || op == BinaryOp::kMinimum) return l.run<bool, bool>(AndF{});
      LOOM_FAIL("cuda::binary: ", native::binary_op_name(op), " is not supported for bool");
    } else {
      arithmetic<T>(op, l, alpha);
    }
  });
}

void isclose(const ElementwiseLayout& layout, void* out, const void* a, const void* b,
             double rtol, double atol, int device, uint64_t stream) {
  loops::map2<bool, double, double>(layout, out, a, b, IsCloseF{rtol, atol}, device, stream);
}

}  // namespace cuda
}  // namespace loom
