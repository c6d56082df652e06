// The vocabulary the op tables (UnaryOps.h, BinaryOps.h) write their formulas
// in, for one element on the host or a CUDA device.
//
// A formula is a template over T, written once:
//
//   template <typename T> LOOM_HOST_DEVICE T backward(T g, T x) const {
//     using S = op_scalar_t<T>;
//     return where(x > S(0), g, g * S(slope));
//   }
//
// and instantiated three ways: T = float or double inside the CPU and CUDA
// kernels (the functions below), and T = Tensor in the autograd layer, where
// the same calls resolve by argument-dependent lookup to loom's
// differentiable ops (exp, where, operator>, ... in
// autograd/functions/Elementwise.h), so a derivative under create_graph has
// a history of its own.  S is T for numbers and double for Tensor (a Scalar
// operand), so constants keep T's precision in kernels.
//
// Both g++ and nvcc compile this header: no Tensor, no CUDA headers.  Each
// math function names the C library's typed function (expf / exp), which
// CUDA also provides on the device.
#pragma once

#include <math.h>

#include <type_traits>

#include "tensor/HostDevice.h"

namespace loom {

// The type of a formula's constants: T itself for numbers, double (a Scalar)
// for tensors.
template <typename T, bool = std::is_arithmetic<T>::value>
struct OpScalar {
  using type = T;
};
template <typename T>
struct OpScalar<T, false> {
  using type = double;
};
template <typename T>
using op_scalar_t = typename OpScalar<T>::type;

namespace opmath {

// cond ? a : b, for one element (loom::where for tensors).
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
LOOM_HOST_DEVICE inline T where(bool cond, T a, T b) {
  return cond ? a : b;
}
// A zero of x's type (loom::zeros_like for tensors).
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
LOOM_HOST_DEVICE inline T zeros_like(T) {
  return T(0);
}

LOOM_HOST_DEVICE inline float exp(float x) { return ::expf(x); }
LOOM_HOST_DEVICE inline double exp(double x) { return ::exp(x); }
LOOM_HOST_DEVICE inline float expm1(float x) { return ::expm1f(x); }
LOOM_HOST_DEVICE inline double expm1(double x) { return ::expm1(x); }
LOOM_HOST_DEVICE inline float pow(float x, float y) { return ::powf(x, y); }
LOOM_HOST_DEVICE inline double pow(double x, double y) { return ::pow(x, y); }
LOOM_HOST_DEVICE inline float log(float x) { return ::logf(x); }
LOOM_HOST_DEVICE inline double log(double x) { return ::log(x); }
LOOM_HOST_DEVICE inline float log1p(float x) { return ::log1pf(x); }
LOOM_HOST_DEVICE inline double log1p(double x) { return ::log1p(x); }
LOOM_HOST_DEVICE inline float sqrt(float x) { return ::sqrtf(x); }
LOOM_HOST_DEVICE inline double sqrt(double x) { return ::sqrt(x); }
LOOM_HOST_DEVICE inline float rsqrt(float x) { return 1.0f / ::sqrtf(x); }
LOOM_HOST_DEVICE inline double rsqrt(double x) { return 1.0 / ::sqrt(x); }
LOOM_HOST_DEVICE inline float tanh(float x) { return ::tanhf(x); }
LOOM_HOST_DEVICE inline double tanh(double x) { return ::tanh(x); }
LOOM_HOST_DEVICE inline float erf(float x) { return ::erff(x); }
LOOM_HOST_DEVICE inline double erf(double x) { return ::erf(x); }
// 1 / (1 + e^-x): e^-x overflowing to inf gives exactly 0.
LOOM_HOST_DEVICE inline float sigmoid(float x) { return 1.0f / (1.0f + ::expf(-x)); }
LOOM_HOST_DEVICE inline double sigmoid(double x) { return 1.0 / (1.0 + ::exp(-x)); }

// |x| and sign(x) (-1, 0 or 1; 0 for nan) for every numeric type; sign is
// the identity on bool.
LOOM_HOST_DEVICE inline float abs(float x) { return ::fabsf(x); }
LOOM_HOST_DEVICE inline double abs(double x) { return ::fabs(x); }
template <typename T, typename = std::enable_if_t<std::is_integral<T>::value>>
LOOM_HOST_DEVICE inline T abs(T x) {
  if constexpr (std::is_unsigned<T>::value) return x;
  else return x < T(0) ? static_cast<T>(-x) : x;
}
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
LOOM_HOST_DEVICE inline T sign(T x) {
  if constexpr (std::is_same<T, bool>::value) return x;
  else if constexpr (std::is_unsigned<T>::value) return static_cast<T>(x > T(0));
  else return static_cast<T>((T(0) < x) - (x < T(0)));
}

}  // namespace opmath
}  // namespace loom
