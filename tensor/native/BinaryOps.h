// The binary op table: one entry per elementwise op of two tensors
// (arithmetic and comparisons), holding everything about the op in one place.
//
//   struct Mul {
//     static constexpr const char* name = "mul";               // errors
//     static constexpr BinaryDType dtype = BinaryDType::kLogicalBool;
//     static constexpr bool saves_a = true, saves_b = true, saves_out = false;
//     template <typename T> LOOM_HOST_DEVICE T forward(T a, T b) const;  // numbers
//     template <typename T> T grad_a(T g, T a, T b, T out) const;        // Tensor
//     template <typename T> T grad_b(T g, T a, T b, T out) const;
//   };
//
// From the list BinaryOpList follow: the op's id (BinaryOp) and name; the
// dtype rules (native/Binary.cpp); the CPU loops (cpu/Binary.cpp) and CUDA
// kernels (cuda/Binary.cu), which instantiate forward for every dtype the
// rule allows; the autograd node (autograd/functions/Elementwise.cpp), which
// saves what saves_* ask for and runs grad_a / grad_b with T = Tensor (so the
// gradient is differentiable again), then sums it back over broadcast dims;
// and the lists the parity tests walk.  Comparisons have no gradient.
//
// Derivatives follow PyTorch's derivatives.yaml (ties of maximum/minimum
// split the gradient evenly; pow's exponent gradient is 0 where the base is
// 0 and the exponent >= 0).  The formulas are written in OpMath.h's
// vocabulary, so they also compile for numbers.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/native/OpMath.h"
#include "tensor/native/UnaryOps.h"

namespace loom {
namespace optable {

// The dtype two operands compute in is their promoted dtype (native/Binary.h);
// the rule says what happens then.
enum class BinaryDType {
  kPromote,      // integers stay integral; bool throws (add, sub, pow)
  kLogicalBool,  // as kPromote, but bool is allowed: logical and/or (mul, maximum, minimum)
  kToFloat,      // integers and bool compute as float32 (div)
  kCompare,      // every dtype; the result is bool (eq, ..., ge)
};

// add/sub's alpha (a + alpha * b); other ops take none.
struct BinaryArgs {
  double alpha = 1;
};

// ---- arithmetic ------------------------------------------------------------------

// a + alpha * b.
struct Add {
  static constexpr const char* name = "add";
  static constexpr BinaryDType dtype = BinaryDType::kPromote;
  static constexpr bool saves_a = false, saves_b = false, saves_out = false;
  double alpha = 1;
  Add() = default;
  explicit Add(const BinaryArgs& args) : alpha(args.alpha) {}
  template <typename T> LOOM_HOST_DEVICE T forward(T a, T b) const {
    return static_cast<T>(a + static_cast<T>(alpha) * b);
  }
  template <typename T> T grad_a(T g, T, T, T) const { return g; }
  template <typename T> T grad_b(T g, T, T, T) const {
    using S = op_scalar_t<T>;
    return alpha == 1 ? g : g * S(alpha);
  }
};

// a - alpha * b.
struct Sub {
  static constexpr const char* name = "sub";
  static constexpr BinaryDType dtype = BinaryDType::kPromote;
  static constexpr bool saves_a = false, saves_b = false, saves_out = false;
  double alpha = 1;
  Sub() = default;
  explicit Sub(const BinaryArgs& args) : alpha(args.alpha) {}
  template <typename T> LOOM_HOST_DEVICE T forward(T a, T b) const {
    return static_cast<T>(a - static_cast<T>(alpha) * b);
  }
  template <typename T> T grad_a(T g, T, T, T) const { return g; }
  template <typename T> T grad_b(T g, T, T, T) const {
    using S = op_scalar_t<T>;
    return alpha == 1 ? -g : g * S(-alpha);
  }
};

// a * b (logical and on bool).
struct Mul {
  static constexpr const char* name = "mul";
  static constexpr BinaryDType dtype = BinaryDType::kLogicalBool;
  static constexpr bool saves_a = true, saves_b = true, saves_out = false;
  template <typename T> LOOM_HOST_DEVICE T forward(T a, T b) const {
    return static_cast<T>(a * b);
  }
  template <typename T> T grad_a(T g, T, T b, T) const { return g * b; }
  template <typename T> T grad_b(T g, T a, T, T) const { return g * a; }
};

// True division.
struct Div {
  static constexpr const char* name = "div";
  static constexpr BinaryDType dtype = BinaryDType::kToFloat;
  static constexpr bool saves_a = true, saves_b = true, saves_out = false;
  template <typename T> LOOM_HOST_DEVICE T forward(T a, T b) const { return a / b; }
  template <typename T> T grad_a(T g, T, T b, T) const { return g / b; }
  template <typename T> T grad_b(T g, T a, T b, T) const { return -g * a / (b * b); }
};

// a ** b.  Integers by squaring; a negative integer exponent truncates
// 1 / a^|b| toward zero (so 1, -1 or 0).
struct Pow {
  static constexpr const char* name = "pow";
  static constexpr BinaryDType dtype = BinaryDType::kPromote;
  static constexpr bool saves_a = true, saves_b = true, saves_out = true;
  template <typename T> LOOM_HOST_DEVICE T forward(T a, T b) const {
    if constexpr (std::is_floating_point<T>::value) {
      return pow(a, b);
    } else {
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
  template <typename T> T grad_a(T g, T a, T b, T) const {
    using S = op_scalar_t<T>;
    return g * b * pow(a, b - S(1));
  }
  template <typename T> T grad_b(T g, T a, T b, T out) const {
    using S = op_scalar_t<T>;
    // The limit 0 where a == 0 and b >= 0, instead of 0 * -inf (bool * bool: and).
    return where((a == S(0)) * (b >= S(0)), S(0), g * out * log(a));
  }
};

// The larger of a and b; nan wins (logical or on bool).  Ties split the
// gradient evenly.
struct Maximum {
  static constexpr const char* name = "maximum";
  static constexpr BinaryDType dtype = BinaryDType::kLogicalBool;
  static constexpr bool saves_a = true, saves_b = true, saves_out = false;
  template <typename T> LOOM_HOST_DEVICE T forward(T a, T b) const {
    return a > b || a != a ? a : b;
  }
  template <typename T> T grad_a(T g, T a, T b, T) const {
    using S = op_scalar_t<T>;
    return where(a < b, S(0), where(a == b, g * S(0.5), g));
  }
  template <typename T> T grad_b(T g, T a, T b, T) const {
    using S = op_scalar_t<T>;
    return where(a > b, S(0), where(a == b, g * S(0.5), g));
  }
};

// The smaller of a and b; nan wins (logical and on bool).
struct Minimum {
  static constexpr const char* name = "minimum";
  static constexpr BinaryDType dtype = BinaryDType::kLogicalBool;
  static constexpr bool saves_a = true, saves_b = true, saves_out = false;
  template <typename T> LOOM_HOST_DEVICE T forward(T a, T b) const {
    return a < b || a != a ? a : b;
  }
  template <typename T> T grad_a(T g, T a, T b, T) const {
    using S = op_scalar_t<T>;
    return where(a > b, S(0), where(a == b, g * S(0.5), g));
  }
  template <typename T> T grad_b(T g, T a, T b, T) const {
    using S = op_scalar_t<T>;
    return where(a < b, S(0), where(a == b, g * S(0.5), g));
  }
};

// ---- comparisons (bool results, no gradient) -------------------------------------

struct Comparison {
  static constexpr BinaryDType dtype = BinaryDType::kCompare;
  static constexpr bool saves_a = false, saves_b = false, saves_out = false;
  template <typename T> T grad_a(T g, T, T, T) const { return g; }
  template <typename T> T grad_b(T g, T, T, T) const { return g; }
};
struct Eq : Comparison {
  static constexpr const char* name = "eq";
  template <typename T> LOOM_HOST_DEVICE bool forward(T a, T b) const { return a == b; }
};
struct Ne : Comparison {
  static constexpr const char* name = "ne";
  template <typename T> LOOM_HOST_DEVICE bool forward(T a, T b) const { return a != b; }
};
struct Lt : Comparison {
  static constexpr const char* name = "lt";
  template <typename T> LOOM_HOST_DEVICE bool forward(T a, T b) const { return a < b; }
};
struct Le : Comparison {
  static constexpr const char* name = "le";
  template <typename T> LOOM_HOST_DEVICE bool forward(T a, T b) const { return a <= b; }
};
struct Gt : Comparison {
  static constexpr const char* name = "gt";
  template <typename T> LOOM_HOST_DEVICE bool forward(T a, T b) const { return a > b; }
};
struct Ge : Comparison {
  static constexpr const char* name = "ge";
  template <typename T> LOOM_HOST_DEVICE bool forward(T a, T b) const { return a >= b; }
};

// ---- the list --------------------------------------------------------------------

using BinaryOpList = OpList<Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge>;

// Whether the kernels instantiate Op for operands of type T.
template <typename Op, typename T>
constexpr bool binary_accepts() {
  if constexpr (Op::dtype == BinaryDType::kCompare || std::is_floating_point<T>::value) {
    return true;
  } else if constexpr (std::is_same<T, bool>::value) {
    return Op::dtype == BinaryDType::kLogicalBool;
  } else {
    return Op::dtype != BinaryDType::kToFloat;
  }
}

}  // namespace optable

namespace native {

// A binary op's id: its position in optable::BinaryOpList.
enum class BinaryOp : int8_t {};

template <typename Op>
constexpr BinaryOp binary_op() {
  return static_cast<BinaryOp>(optable::OpIndex<Op, optable::BinaryOpList>::value);
}

// Calls f(optable::OpTag<Op>{}) with the op `id` stands for.
template <typename F>
void visit_binary_op(BinaryOp id, F&& f) {
  optable::visit_op(optable::BinaryOpList{}, static_cast<int>(id), f);
}

}  // namespace native
}  // namespace loom
