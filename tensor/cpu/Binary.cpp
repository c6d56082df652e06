// CPU kernels for native::binary: one typed lambda per op over cpu::map.
#include <cmath>

#include "tensor/cpu/Loops.h"
#include "tensor/native/Binary.h"

namespace loom {
namespace cpu {

namespace {

template <typename T>
T power(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(a, b);
  } else {
    if (b < 0) return a == 1 ? 1 : 0;  // integer pow with negative exponent
    T r = 1;
    for (T i = 0; i < b; ++i) r = static_cast<T>(r * a);
    return r;
  }
}

template <typename T>
void arithmetic(native::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                Scalar alpha_s) {
  using native::BinaryOp;
  const T alpha = static_cast<T>(alpha_s.to_double());
  switch (op) {
    case BinaryOp::kAdd:
      if (alpha == T(1)) return map<T, T, T>(out, {&a, &b}, [](T x, T y) { return T(x + y); });
      return map<T, T, T>(out, {&a, &b}, [alpha](T x, T y) { return T(x + alpha * y); });
    case BinaryOp::kSub:
      if (alpha == T(1)) return map<T, T, T>(out, {&a, &b}, [](T x, T y) { return T(x - y); });
      return map<T, T, T>(out, {&a, &b}, [alpha](T x, T y) { return T(x - alpha * y); });
    case BinaryOp::kMul:
      return map<T, T, T>(out, {&a, &b}, [](T x, T y) { return T(x * y); });
    case BinaryOp::kDiv:
      return map<T, T, T>(out, {&a, &b}, [](T x, T y) { return T(x / y); });
    case BinaryOp::kPow:
      return map<T, T, T>(out, {&a, &b}, [](T x, T y) { return power<T>(x, y); });
    case BinaryOp::kMaximum:
      return map<T, T, T>(out, {&a, &b}, [](T x, T y) {
        if constexpr (std::is_floating_point_v<T>) if (std::isnan(x) || std::isnan(y)) return T(NAN);
        return x > y ? x : y;
      });
    case BinaryOp::kMinimum:
      return map<T, T, T>(out, {&a, &b}, [](T x, T y) {
        if constexpr (std::is_floating_point_v<T>) if (std::isnan(x) || std::isnan(y)) return T(NAN);
        return x < y ? x : y;
      });
    default:
      break;
  }
  LOOM_FAIL("binary_kernel: ", native::binary_op_name(op), " is not an arithmetic op");
}

template <typename T>
void comparison(native::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using native::BinaryOp;
  switch (op) {
    case BinaryOp::kEq: return map<bool, T, T>(out, {&a, &b}, [](T x, T y) { return x == y; });
    case BinaryOp::kNe: return map<bool, T, T>(out, {&a, &b}, [](T x, T y) { return x != y; });
    case BinaryOp::kLt: return map<bool, T, T>(out, {&a, &b}, [](T x, T y) { return x < y; });
    case BinaryOp::kLe: return map<bool, T, T>(out, {&a, &b}, [](T x, T y) { return x <= y; });
    case BinaryOp::kGt: return map<bool, T, T>(out, {&a, &b}, [](T x, T y) { return x > y; });
    case BinaryOp::kGe: return map<bool, T, T>(out, {&a, &b}, [](T x, T y) { return x >= y; });
    default: break;
  }
  LOOM_FAIL("binary_kernel: ", native::binary_op_name(op), " is not a comparison");
}

}  // namespace

void binary_kernel(native::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
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
      if (op == native::BinaryOp::kMul)
        return map<bool, bool, bool>(out, {&a, &b}, [](bool x, bool y) { return x && y; });
      if (op == native::BinaryOp::kMaximum)
        return map<bool, bool, bool>(out, {&a, &b}, [](bool x, bool y) { return x || y; });
      return map<bool, bool, bool>(out, {&a, &b}, [](bool x, bool y) { return x && y; });
    } else {
      arithmetic<T>(op, out, a, b, alpha);
    }
  });
}

}  // namespace cpu
}  // namespace loom
