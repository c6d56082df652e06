// CPU kernels for native::binary: one typed lambda per op.
//
// An operand that is one broadcast value (a wrapped scalar, `t * 2`) is read
// once and captured, so the loop streams over a single tensor; dense runs are
// vectorised (DenseLoops.h).
#include <cmath>
#include <type_traits>

#include "tensor/cpu/DenseLoops.h"
#include "tensor/native/Binary.h"

namespace loom {
namespace cpu {

namespace {

using native::BinaryOp;

template <typename T>
T power(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(a, b);
  } else {
    // Integer pow; a negative exponent truncates 1 / a^|b| toward zero.
    if (b < 0) {
      if (a == 1) return 1;
      if constexpr (std::is_signed_v<T>) {
        if (a == -1) return (b % 2 == 0) ? 1 : -1;
      }
      return 0;
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

// out = f(a, b), capturing a broadcast-scalar operand as a constant.
template <typename Out, typename T, typename F>
void run(const Tensor& out, const Tensor& a, const Tensor& b, const F& f) {
  if (is_broadcast_scalar(b) && !is_broadcast_scalar(a)) {
    const T y = *static_cast<const T*>(b.data_ptr());
    return simd_map<Out, T>(out, a, [f, y](T x) { return f(x, y); });
  }
  if (is_broadcast_scalar(a) && !is_broadcast_scalar(b)) {
    const T x = *static_cast<const T*>(a.data_ptr());
    return simd_map<Out, T>(out, b, [f, x](T y) { return f(x, y); });
  }
  simd_map<Out, T, T>(out, a, b, f);
}

template <typename T>
void arithmetic(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                Scalar alpha_s) {
  const T alpha = static_cast<T>(alpha_s.to_double());
  switch (op) {
    case BinaryOp::kAdd:
      if (alpha == T(1)) return run<T, T>(out, a, b, [](T x, T y) { return T(x + y); });
      return run<T, T>(out, a, b, [alpha](T x, T y) { return T(x + alpha * y); });
    case BinaryOp::kSub:
      if (alpha == T(1)) return run<T, T>(out, a, b, [](T x, T y) { return T(x - y); });
      return run<T, T>(out, a, b, [alpha](T x, T y) { return T(x - alpha * y); });
    case BinaryOp::kMul:
      return run<T, T>(out, a, b, [](T x, T y) { return T(x * y); });
    case BinaryOp::kDiv:
      return run<T, T>(out, a, b, [](T x, T y) { return T(x / y); });
    case BinaryOp::kPow:
      if constexpr (std::is_floating_point_v<T>) {
        if (is_broadcast_scalar(b) && *static_cast<const T*>(b.data_ptr()) == T(2))
          return simd_map<T, T>(out, a, [](T x) { return x * x; });
      }
      return run<T, T>(out, a, b, [](T x, T y) { return power<T>(x, y); });
    case BinaryOp::kMaximum:
      // nan wins, as in PyTorch (the first test is false only for nan).
      return run<T, T>(out, a, b, [](T x, T y) { return x > y || x != x ? x : y; });
    case BinaryOp::kMinimum:
      return run<T, T>(out, a, b, [](T x, T y) { return x < y || x != x ? x : y; });
    default:
      break;
  }
  LOOM_FAIL("binary_kernel: ", native::binary_op_name(op), " is not an arithmetic op");
}

template <typename T>
void comparison(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::kEq: return run<bool, T>(out, a, b, [](T x, T y) { return x == y; });
    case BinaryOp::kNe: return run<bool, T>(out, a, b, [](T x, T y) { return x != y; });
    case BinaryOp::kLt: return run<bool, T>(out, a, b, [](T x, T y) { return x < y; });
    case BinaryOp::kLe: return run<bool, T>(out, a, b, [](T x, T y) { return x <= y; });
    case BinaryOp::kGt: return run<bool, T>(out, a, b, [](T x, T y) { return x > y; });
    case BinaryOp::kGe: return run<bool, T>(out, a, b, [](T x, T y) { return x >= y; });
    default: break;
  }
  LOOM_FAIL("binary_kernel: ", native::binary_op_name(op), " is not a comparison");
}

}  // namespace

void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                   Scalar alpha) {
  if (native::is_comparison(op)) {
    dispatch_dtype(a.dtype(), [&](auto tag) {
      comparison<typename decltype(tag)::type>(op, out, a, b);
    });
    return;
  }
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      // Only mul/maximum/minimum reach here for bool: logical and/or.
      if (op == BinaryOp::kMaximum)
        return run<bool, bool>(out, a, b, [](bool x, bool y) { return x || y; });
      return run<bool, bool>(out, a, b, [](bool x, bool y) { return x && y; });
    } else {
      arithmetic<T>(op, out, a, b, alpha);
    }
  });
}

void isclose_kernel(const Tensor& out, const Tensor& a, const Tensor& b, double rtol,
                    double atol) {
  simd_map<bool, double, double>(out, a, b, [rtol, atol](double x, double y) {
    if (x == y) return true;  // equal infinities too
    // nan and infinities (now unequal) are never close.
    return std::isfinite(x) && std::isfinite(y) && std::abs(x - y) <= atol + rtol * std::abs(y);
  });
}

}  // namespace cpu
}  // namespace loom
