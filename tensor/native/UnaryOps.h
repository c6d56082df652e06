// The unary op table: one entry per elementwise op of one tensor, holding
// everything about the op in one place.
//
//   struct Silu {
//     static constexpr const char* name = "silu";        // errors, grad_fn name
//     static constexpr UnaryDType dtype = UnaryDType::kFloatOnly;   // dtype rule
//     static constexpr UnarySaves saves = UnarySaves::kInput;       // for backward
//     template <typename T> LOOM_HOST_DEVICE T forward(T x) const;      // numbers
//     template <typename T> LOOM_HOST_DEVICE T backward(T g, T s) const; // numbers
//   };                                                     // and Tensor
//
// From the list UnaryOpList follow: the op's id (UnaryOp, its index in the
// list) and name; the dtype rule (native/Unary.cpp); the CPU loops
// (cpu/Unary.cpp) and CUDA kernels (cuda/Unary.cu), which instantiate
// forward and backward for float and double (and the integer dtypes the rule
// allows); the autograd node (autograd/functions/ElementwiseUnary.cpp),
// which runs backward as a fused kernel, or, under create_graph, with T =
// Tensor so the gradient is differentiable again (see OpMath.h); and the
// lists the tests walk (tests/autograd/unary_ops_test.cpp).  Adding an op is
// an entry here, a declaration and a one-line definition of its function
// (autograd/functions/Elementwise.h, ElementwiseUnary.cpp), and a line in
// the test's reference table.
//
// backward(g, s) gets the incoming gradient and the saved tensor (the input
// x, or the output y, as `saves` says; nothing for kNothing).  Derivatives
// follow PyTorch's derivatives.yaml, so gradients agree at kinks too.
// Parameters (a slope, alpha, beta) come through UnaryArgs, as doubles.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "tensor/native/OpMath.h"

namespace loom {
namespace optable {

using namespace opmath;  // exp, where, ... for numbers; tensors find loom's by ADL

// What an op computes integer and bool inputs as.
enum class UnaryDType {
  kKeep,        // every dtype, bool included (sign)
  kKeepNoBool,  // integers stay integral; bool throws (neg, abs, relu)
  kToFloat,     // integers and bool compute as float32 (exp, log, ...)
  kFloatOnly,   // non-floating inputs throw (the activations, as in PyTorch)
};

// What backward needs kept from the forward.
enum class UnarySaves { kNothing, kInput, kOutput };

// An op's parameters, by position; each op says which it reads.  A
// parameter left unset (NaN) takes the op's default (leaky_relu's slope
// 0.01, ...), so UnaryArgs{} means "the defaults".
struct UnaryArgs {
  static constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();
  double alpha = kUnset;
  double beta = kUnset;
  double alpha_or(double fallback) const { return alpha != alpha ? fallback : alpha; }
  double beta_or(double fallback) const { return beta != beta ? fallback : beta; }
};

// ---- arithmetic ------------------------------------------------------------------

struct Neg {
  static constexpr const char* name = "neg";
  static constexpr UnaryDType dtype = UnaryDType::kKeepNoBool;
  static constexpr UnarySaves saves = UnarySaves::kNothing;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return static_cast<T>(-x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T) const { return -g; }
};

struct Abs {
  static constexpr const char* name = "abs";
  static constexpr UnaryDType dtype = UnaryDType::kKeepNoBool;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return abs(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const { return g * sign(x); }
};

// -1, 0 or 1 (0 for nan); the identity on bool.  Its gradient is zero.
struct Sign {
  static constexpr const char* name = "sign";
  static constexpr UnaryDType dtype = UnaryDType::kKeep;
  static constexpr UnarySaves saves = UnarySaves::kNothing;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return sign(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T) const { return zeros_like(g); }
};

// ---- exponentials and roots ------------------------------------------------------

struct Exp {
  static constexpr const char* name = "exp";
  static constexpr UnaryDType dtype = UnaryDType::kToFloat;
  static constexpr UnarySaves saves = UnarySaves::kOutput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return exp(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T y) const { return g * y; }
};

// e^x - 1, exact near 0.
struct Expm1 {
  static constexpr const char* name = "expm1";
  static constexpr UnaryDType dtype = UnaryDType::kToFloat;
  static constexpr UnarySaves saves = UnarySaves::kOutput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return expm1(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T y) const {
    using S = op_scalar_t<T>;
    return g * (y + S(1));
  }
};

struct Log {
  static constexpr const char* name = "log";
  static constexpr UnaryDType dtype = UnaryDType::kToFloat;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return log(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const { return g / x; }
};

// log(1 + x), exact near 0.
struct Log1p {
  static constexpr const char* name = "log1p";
  static constexpr UnaryDType dtype = UnaryDType::kToFloat;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return log1p(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    return g / (x + S(1));
  }
};

struct Sqrt {
  static constexpr const char* name = "sqrt";
  static constexpr UnaryDType dtype = UnaryDType::kToFloat;
  static constexpr UnarySaves saves = UnarySaves::kOutput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return sqrt(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T y) const {
    using S = op_scalar_t<T>;
    return g / (y * S(2));
  }
};

// 1 / sqrt(x).
struct Rsqrt {
  static constexpr const char* name = "rsqrt";
  static constexpr UnaryDType dtype = UnaryDType::kToFloat;
  static constexpr UnarySaves saves = UnarySaves::kOutput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return rsqrt(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T y) const {
    using S = op_scalar_t<T>;
    return g * (y * y * y * S(-0.5));
  }
};

// The Gauss error function.
struct Erf {
  static constexpr const char* name = "erf";
  static constexpr UnaryDType dtype = UnaryDType::kToFloat;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return erf(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    return g * (exp(-(x * x)) * S(1.1283791670955125739));  // 2 / sqrt(pi)
  }
};

// ---- activations -----------------------------------------------------------------

// max(x, 0); nan stays nan.
struct Relu {
  static constexpr const char* name = "relu";
  static constexpr UnaryDType dtype = UnaryDType::kKeepNoBool;
  static constexpr UnarySaves saves = UnarySaves::kOutput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const {
    if constexpr (std::is_unsigned<T>::value) return x;
    else return x < T(0) ? T(0) : x;
  }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T y) const {
    using S = op_scalar_t<T>;
    return where(y > S(0), g, S(0));
  }
};

// min(max(x, 0), 6): hardtanh(x, 0, 6).
struct Relu6 {
  static constexpr const char* name = "relu6";
  static constexpr UnaryDType dtype = UnaryDType::kKeepNoBool;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const {
    if constexpr (std::is_unsigned<T>::value) return x > T(6) ? T(6) : x;
    else return x < T(0) ? T(0) : (x > T(6) ? T(6) : x);
  }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    return where(x <= S(0), S(0), where(x >= S(6), S(0), g));
  }
};

// x for x > 0, negative_slope * x otherwise.  UnaryArgs: alpha = negative_slope.
struct LeakyRelu {
  static constexpr const char* name = "leaky_relu";
  static constexpr UnaryDType dtype = UnaryDType::kFloatOnly;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  double negative_slope = 0.01;
  LeakyRelu() = default;
  explicit LeakyRelu(const UnaryArgs& a) : negative_slope(a.alpha_or(0.01)) {}
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const {
    return x > T(0) ? x : x * T(negative_slope);
  }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    return where(x > S(0), g, g * S(negative_slope));
  }
};

// x for x > 0, alpha * (e^x - 1) otherwise.  UnaryArgs: alpha.
struct Elu {
  static constexpr const char* name = "elu";
  static constexpr UnaryDType dtype = UnaryDType::kFloatOnly;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  double alpha = 1;
  Elu() = default;
  explicit Elu(const UnaryArgs& a) : alpha(a.alpha_or(1)) {}
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const {
    return x > T(0) ? x : T(alpha) * expm1(x);
  }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    return where(x > S(0), g, g * (exp(x) * S(alpha)));
  }
};

// x * Phi(x), Phi the standard normal CDF (approximate = "none").
struct Gelu {
  static constexpr const char* name = "gelu";
  static constexpr UnaryDType dtype = UnaryDType::kFloatOnly;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const {
    return x * T(0.5) * (T(1) + erf(x * T(0.70710678118654752440)));
  }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    const T cdf = (erf(x * S(0.70710678118654752440)) + S(1)) * S(0.5);
    const T pdf = exp(x * x * S(-0.5)) * S(0.39894228040143267794);  // 1 / sqrt(2 pi)
    return g * (cdf + x * pdf);
  }
};

// GELU's tanh approximation (approximate = "tanh"):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluTanh {
  static constexpr const char* name = "gelu_tanh";
  static constexpr UnaryDType dtype = UnaryDType::kFloatOnly;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  static constexpr double kBeta = 0.79788456080286535588;  // sqrt(2 / pi)
  static constexpr double kKappa = 0.044715;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const {
    const T inner = T(kBeta) * (x + T(kKappa) * x * x * x);
    return T(0.5) * x * (T(1) + tanh(inner));
  }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    const T x_sq = x * x;
    const T t = tanh((x + x_sq * x * S(kKappa)) * S(kBeta));
    const T left_derivative = (t + S(1)) * S(0.5);
    const T right_derivative =
        x * S(0.5) * (S(1) - t * t) * (x_sq * S(3 * kKappa) + S(1)) * S(kBeta);
    return g * (left_derivative + right_derivative);
  }
};

// x * sigmoid(x) (swish).
struct Silu {
  static constexpr const char* name = "silu";
  static constexpr UnaryDType dtype = UnaryDType::kFloatOnly;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return x / (T(1) + exp(-x)); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    const T s = sigmoid(x);
    return g * s * (x * (S(1) - s) + S(1));
  }
};

// x * relu6(x + 3) / 6.
struct Hardswish {
  static constexpr const char* name = "hardswish";
  static constexpr UnaryDType dtype = UnaryDType::kFloatOnly;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const {
    return x <= T(-3) ? T(0) : (x >= T(3) ? x : x * (x + T(3)) / T(6));
  }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    // x == 3 takes the upper branch, as PyTorch 1.13's kernels do.
    return where(x < S(-3), S(0), where(x < S(3), g * (x / S(3) + S(0.5)), g));
  }
};

// relu6(x + 3) / 6.
struct Hardsigmoid {
  static constexpr const char* name = "hardsigmoid";
  static constexpr UnaryDType dtype = UnaryDType::kFloatOnly;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const {
    return x <= T(-3) ? T(0) : (x >= T(3) ? T(1) : (x + T(3)) / T(6));
  }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    return where(x > S(-3), where(x < S(3), g / S(6), S(0)), S(0));
  }
};

// log(1 + e^(beta x)) / beta, and x itself where beta x > threshold.
// UnaryArgs: alpha = beta, beta = threshold.
struct Softplus {
  static constexpr const char* name = "softplus";
  static constexpr UnaryDType dtype = UnaryDType::kFloatOnly;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  double beta = 1;
  double threshold = 20;
  Softplus() = default;
  explicit Softplus(const UnaryArgs& a) : beta(a.alpha_or(1)), threshold(a.beta_or(20)) {}
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const {
    const T bx = x * T(beta);
    return bx > T(threshold) ? x : log1p(exp(bx)) / T(beta);
  }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    const T z = exp(x * S(beta));
    return where(x * S(beta) > S(threshold), g, g * z / (z + S(1)));
  }
};

// x * tanh(softplus(x)).
struct Mish {
  static constexpr const char* name = "mish";
  static constexpr UnaryDType dtype = UnaryDType::kFloatOnly;
  static constexpr UnarySaves saves = UnarySaves::kInput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const {
    return x * tanh(log1p(exp(x)));
  }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
    using S = op_scalar_t<T>;
    const T s = sigmoid(x);
    const T t = tanh(log1p(exp(x)));
    return g * (t + x * s * (S(1) - t * t));
  }
};

struct Sigmoid {
  static constexpr const char* name = "sigmoid";
  static constexpr UnaryDType dtype = UnaryDType::kToFloat;
  static constexpr UnarySaves saves = UnarySaves::kOutput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return sigmoid(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T y) const {
    using S = op_scalar_t<T>;
    return g * y * (S(1) - y);
  }
};

struct Tanh {
  static constexpr const char* name = "tanh";
  static constexpr UnaryDType dtype = UnaryDType::kToFloat;
  static constexpr UnarySaves saves = UnarySaves::kOutput;
  template <typename T> LOOM_HOST_DEVICE T forward(T x) const { return tanh(x); }
  template <typename T> LOOM_HOST_DEVICE T backward(T g, T y) const {
    using S = op_scalar_t<T>;
    return g * (S(1) - y * y);
  }
};

// ---- the list --------------------------------------------------------------------

template <typename... Ops>
struct OpList {
  static constexpr int size = sizeof...(Ops);
};

using UnaryOpList = OpList<Neg, Abs, Sign, Exp, Expm1, Log, Log1p, Sqrt, Rsqrt, Erf, Relu, Relu6,
                           LeakyRelu, Elu, Gelu, GeluTanh, Silu, Hardswish, Hardsigmoid, Softplus,
                           Mish, Sigmoid, Tanh>;

// An op's position in its list.
template <typename Op, typename List>
struct OpIndex;
template <typename Op, typename... Rest>
struct OpIndex<Op, OpList<Op, Rest...>> {
  static constexpr int value = 0;
};
template <typename Op, typename First, typename... Rest>
struct OpIndex<Op, OpList<First, Rest...>> {
  static constexpr int value = 1 + OpIndex<Op, OpList<Rest...>>::value;
};

// Calls f(TypeTag<Op>{}) for the op at position `index` of List; false when
// there is none.
template <typename Op>
struct OpTag {
  using type = Op;
};
template <typename... Ops, typename F>
bool visit_op(OpList<Ops...>, int index, F&& f) {
  int k = 0;
  return ((index == k++ ? (f(OpTag<Ops>{}), true) : false) || ...);
}

// Calls f(OpTag<Op>{}) for every op of the list, in order.
template <typename... Ops, typename F>
void for_each_op(OpList<Ops...>, F&& f) {
  (f(OpTag<Ops>{}), ...);
}

// An op with its parameters.
template <typename Op, typename Args>
Op make_op(const Args& args) {
  if constexpr (std::is_constructible<Op, const Args&>::value) return Op(args);
  else return Op{};
}

// Whether the kernels instantiate Op for element type T.
template <typename Op, typename T>
constexpr bool unary_accepts() {
  if constexpr (std::is_floating_point<T>::value) return true;
  else if constexpr (std::is_same<T, bool>::value) return Op::dtype == UnaryDType::kKeep;
  else return Op::dtype == UnaryDType::kKeep || Op::dtype == UnaryDType::kKeepNoBool;
}

}  // namespace optable

namespace native {

// A unary op's id: its position in optable::UnaryOpList.
enum class UnaryOp : int8_t {};

template <typename Op>
constexpr UnaryOp unary_op() {
  return static_cast<UnaryOp>(optable::OpIndex<Op, optable::UnaryOpList>::value);
}

// Calls f(optable::OpTag<Op>{}) with the op `id` stands for.
template <typename F>
void visit_unary_op(UnaryOp id, F&& f) {
  optable::visit_op(optable::UnaryOpList{}, static_cast<int>(id), f);
}

}  // namespace native
}  // namespace loom
