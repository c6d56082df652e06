// CPU kernels for native/Unary: the unary table's ops (UnaryOps.h) per
// element, pow with a scalar exponent and clamp, registered into their
// dispatch slots at the bottom.
//
// Contiguous runs are vectorised explicitly (see DenseLoops.h): loom's AVX2
// exp for float32 exp and sigmoid (VecMath.h), Eigen's SIMD array functions
// for log, tanh and float64 exp (within a few ulp of the exact result), AVX
// for sqrt (exact, unlike Eigen's fast-math sqrt), and `omp simd` loops for
// the arithmetic ones.  Strided runs go element by element.  bfloat16 (the
// table's ops and their backward) runs the float32 routines on short
// widened runs (StagedLoops.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <Eigen/Core>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "tensor/cpu/DenseLoops.h"
#include "tensor/cpu/StagedLoops.h"
#include "tensor/cpu/VecMath.h"
#include "tensor/native/Unary.h"

namespace loom {
namespace cpu {
namespace {

using native::UnaryOp;

template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// ---- dense transcendental runs ------------------------------------------------------

constexpr int64_t kBlock = 1024;

// Below this, exp's result is denormal or 0; Eigen clamps such inputs (exp
// would never reach 0), so those blocks are computed with std::exp instead.
template <typename T>
constexpr T exp_underflow() {
  return std::is_same_v<T, float> ? T(-87.3) : T(-708.3);
}

template <typename T>
void exp_dense(T* o, const T* in, int64_t n) {
#if defined(LOOM_VEC_MATH)
  if constexpr (std::is_same_v<T, float>)
    return map_f32(o, in, n, [](__m256 x) { return exp256(x); });
#endif
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    bool tiny = false;
#pragma omp simd reduction(| : tiny)
    for (int64_t k = 0; k < m; ++k) tiny |= in[b + k] < exp_underflow<T>();
    if (tiny) {
      for (int64_t k = 0; k < m; ++k) o[b + k] = std::exp(in[b + k]);
    } else {
      ArrayMap<T>(o + b, m) = ConstArrayMap<T>(in + b, m).exp();
    }
  }
}

template <typename T>
void log_dense(T* o, const T* in, int64_t n) {
  ArrayMap<T>(o, n) = ConstArrayMap<T>(in, n).log();
}

template <typename T>
void tanh_dense(T* o, const T* in, int64_t n) {
  ArrayMap<T>(o, n) = ConstArrayMap<T>(in, n).tanh();
}

// 1 / (1 + exp(-x)): exp(-x) overflowing to inf gives exactly 0, and Eigen's
// clamped underflow (about 1e-38) vanishes next to 1.
template <typename T>
void sigmoid_dense(T* o, const T* in, int64_t n) {
#if defined(LOOM_VEC_MATH)
  if constexpr (std::is_same_v<T, float>)
    return map_f32(o, in, n, [](__m256 x) { return sigmoid256(x); });
#endif
  ArrayMap<T>(o, n) = (T(1) + (-ConstArrayMap<T>(in, n)).exp()).inverse();
}

template <typename T>
void sqrt_dense(T* o, const T* in, int64_t n, bool reciprocal) {
  int64_t k = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; k + 8 <= n; k += 8) {
      __m256 r = _mm256_sqrt_ps(_mm256_loadu_ps(in + k));
      if (reciprocal) r = _mm256_div_ps(one, r);
      _mm256_storeu_ps(o + k, r);
    }
  } else {
    const __m256d one = _mm256_set1_pd(1.0);
    for (; k + 4 <= n; k += 4) {
      __m256d r = _mm256_sqrt_pd(_mm256_loadu_pd(in + k));
      if (reciprocal) r = _mm256_div_pd(one, r);
      _mm256_storeu_pd(o + k, r);
    }
  }
#endif
  for (; k < n; ++k) o[k] = reciprocal ? T(1) / std::sqrt(in[k]) : std::sqrt(in[k]);
}

// ---- the table's ops ---------------------------------------------------------------

// A dense routine for an op where one is faster than the per-element
// formula (Eigen's or loom's SIMD exp/log/tanh, AVX sqrt); other ops take
// the formula in an `omp simd` loop.
template <typename Op, typename T>
struct DenseRoutine {
  static constexpr bool exists = false;
};
template <typename T>
struct DenseRoutine<optable::Exp, T> {
  static constexpr bool exists = true;
  static void run(T* o, const T* i, int64_t n) { exp_dense<T>(o, i, n); }
};
template <typename T>
struct DenseRoutine<optable::Log, T> {
  static constexpr bool exists = true;
  static void run(T* o, const T* i, int64_t n) { log_dense<T>(o, i, n); }
};
template <typename T>
struct DenseRoutine<optable::Tanh, T> {
  static constexpr bool exists = true;
  static void run(T* o, const T* i, int64_t n) { tanh_dense<T>(o, i, n); }
};
template <typename T>
struct DenseRoutine<optable::Sigmoid, T> {
  static constexpr bool exists = true;
  static void run(T* o, const T* i, int64_t n) { sigmoid_dense<T>(o, i, n); }
};
template <typename T>
struct DenseRoutine<optable::Sqrt, T> {
  static constexpr bool exists = true;
  static void run(T* o, const T* i, int64_t n) { sqrt_dense<T>(o, i, n, false); }
};
template <typename T>
struct DenseRoutine<optable::Rsqrt, T> {
  static constexpr bool exists = true;
  static void run(T* o, const T* i, int64_t n) { sqrt_dense<T>(o, i, n, true); }
};

template <typename Op, typename T>
void forward(const Op& op, const Tensor& out, const Tensor& in) {
  if constexpr (std::is_floating_point_v<T> && DenseRoutine<Op, T>::exists) {
    unary_loop<T, T>(out, in, DenseRoutine<Op, T>::run,
                     [op](T x) { return op.template forward<T>(x); });
  } else {
    simd_map<T, T>(out, in, [op](T x) { return op.template forward<T>(x); });
  }
}

// bfloat16 out = op(in) through the float32 routine, a staged run at a time.
template <typename Op>
void forward_bfloat16(const Op& op, const Tensor& out, const Tensor& in) {
  if constexpr (optable::unary_accepts<Op, float>()) {
    staged_map<1>(out, {&in}, [op](float* o, const std::array<const float*, 1>& i, int64_t n) {
      if constexpr (DenseRoutine<Op, float>::exists) {
        DenseRoutine<Op, float>::run(o, i[0], n);
      } else {
        const float* x = i[0];
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) o[k] = op.template forward<float>(x[k]);
      }
    });
  } else {
    LOOM_FAIL(Op::name, ": no kernel for ", out.describe());
  }
}

void unary_kernel(UnaryOp id, const optable::UnaryArgs& args, const Tensor& out, const Tensor& in) {
  native::visit_unary_op(id, [&](auto op_tag) {
    using Op = typename decltype(op_tag)::type;
    const Op op = optable::make_op<Op>(args);
    if (out.dtype() == kBFloat16) return forward_bfloat16(op, out, in);
    dispatch_dtype(out.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (optable::unary_accepts<Op, T>()) {
        forward<Op, T>(op, out, in);
      } else {
        LOOM_FAIL(Op::name, ": no kernel for ", out.describe());
      }
    });
  });
}

void unary_backward_kernel(UnaryOp id, const optable::UnaryArgs& args, const Tensor& out,
                           const Tensor& grad, const Tensor& saved) {
  native::visit_unary_op(id, [&](auto op_tag) {
    using Op = typename decltype(op_tag)::type;
    const Op op = optable::make_op<Op>(args);
    if (out.dtype() == kBFloat16) {
      return staged_map<2>(out, {&grad, &saved},
                           [op](float* o, const std::array<const float*, 2>& in, int64_t n) {
                             const float* g = in[0];
                             const float* s = in[1];
#pragma omp simd
                             for (int64_t k = 0; k < n; ++k)
                               o[k] = op.template backward<float>(g[k], s[k]);
                           });
    }
    dispatch_floating(out.dtype(), Op::name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      simd_map<T, T, T>(out, grad, saved,
                        [op](T g, T s) { return op.template backward<T>(g, s); });
    });
  });
}

// x ** e for an integer e >= 0, by squaring.
template <typename T>
T int_power(T x, int64_t e) {
  T r = 1;
  while (e > 0) {
    if (e & 1) r = T(r * x);
    x = T(x * x);
    e >>= 1;
  }
  return r;
}

// A double bound as T, saturated to T's range (so clamp(uint8, -5) is a no-op).
template <typename T>
T saturate(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// The clamp interval in T; an absent bound is the type's extreme (infinity
// for floats, so that infinities and nan pass through unchanged).
template <typename T>
std::pair<T, T> bounds(const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  constexpr bool fp = std::is_floating_point_v<T>;
  const T lowest = fp ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  const T highest = fp ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  return {min ? saturate<T>(min->to_double()) : lowest,
          max ? saturate<T>(max->to_double()) : highest};
}

void pow_scalar_kernel(const Tensor& out, const Tensor& in, Scalar exponent) {
  const double e = exponent.to_double();
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      LOOM_FAIL("pow_scalar_kernel: bool output");
    } else if constexpr (std::is_floating_point_v<T>) {
      // Common exponents skip std::pow (slow, not vectorised).
      if (e == 1) return simd_map<T, T>(out, in, [](T x) { return x; });
      if (e == 2) return simd_map<T, T>(out, in, [](T x) { return x * x; });
      if (e == 3) return simd_map<T, T>(out, in, [](T x) { return x * x * x; });
      if (e == -1) return simd_map<T, T>(out, in, [](T x) { return T(1) / x; });
      if (e == -2) return simd_map<T, T>(out, in, [](T x) { return T(1) / (x * x); });
      if (e == 0.5) return forward<optable::Sqrt, T>(optable::Sqrt{}, out, in);
      if (e == -0.5) return forward<optable::Rsqrt, T>(optable::Rsqrt{}, out, in);
      const T te = static_cast<T>(e);
      unary_loop<T, T>(
          out, in,
          [te](T* o, const T* i, int64_t n) {
            for (int64_t k = 0; k < n; ++k) o[k] = std::pow(i[k], te);
          },
          [te](T x) { return std::pow(x, te); });
    } else {
      const int64_t ie = exponent.to_int();
      if (ie == 2) return simd_map<T, T>(out, in, [](T x) { return T(x * x); });
      simd_map<T, T>(out, in, [ie](T x) { return int_power<T>(x, ie); });
    }
  });
}

void clamp_kernel(const Tensor& out, const Tensor& in, std::optional<Scalar> min,
                  std::optional<Scalar> max) {
  dispatch_numeric(out.dtype(), "clamp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto [lo, hi] = bounds<T>(min, max);
    // nan fails both comparisons and passes through; lo > hi gives hi, as in PyTorch.
    simd_map<T, T>(out, in, [lo = lo, hi = hi](T x) {
      const T y = x < lo ? lo : x;
      return y > hi ? hi : y;
    });
  });
}

void pow_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& self,
                         double exponent) {
  dispatch_floating(out.dtype(), "pow_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T e = static_cast<T>(exponent);
    if (exponent == 0) return simd_map<T, T, T>(out, grad, self, [](T, T) { return T(0); });
    if (exponent == 1) return simd_map<T, T, T>(out, grad, self, [](T g, T) { return g; });
    if (exponent == 2)
      return simd_map<T, T, T>(out, grad, self, [](T g, T x) { return T(2) * g * x; });
    if (exponent == 3)
      return simd_map<T, T, T>(out, grad, self, [](T g, T x) { return T(3) * g * x * x; });
    simd_map<T, T, T>(out, grad, self, [e](T g, T x) { return e * g * std::pow(x, e - T(1)); });
  });
}

void clamp_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& self,
                           std::optional<Scalar> min, std::optional<Scalar> max) {
  dispatch_floating(out.dtype(), "clamp_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto [lo, hi] = bounds<T>(min, max);
    simd_map<T, T, T>(out, grad, self, [lo = lo, hi = hi](T g, T x) {
      return x >= lo && x <= hi ? g : T(0);
    });
  });
}

}  // namespace

static const native::RegisterKernel reg_unary(native::unary_stub, kCPU, &unary_kernel);
static const native::RegisterKernel reg_unary_backward(native::unary_backward_stub, kCPU,
                                                       &unary_backward_kernel);
static const native::RegisterKernel reg_pow(native::pow_scalar_stub, kCPU, &pow_scalar_kernel);
static const native::RegisterKernel reg_clamp(native::clamp_stub, kCPU, &clamp_kernel);
static const native::RegisterKernel reg_pow_backward(native::pow_backward_stub, kCPU,
                                                     &pow_backward_kernel);
static const native::RegisterKernel reg_clamp_backward(native::clamp_backward_stub, kCPU,
                                                       &clamp_backward_kernel);

}  // namespace cpu
}  // namespace loom
