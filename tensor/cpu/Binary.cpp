// CPU kernels for native::binary: the binary table's formulas (BinaryOps.h)
// in vectorised loops, registered into their dispatch slots at the bottom.
//
// An operand that is one broadcast value (a wrapped scalar, `t * 2`) is read
// once and captured, so the loop streams over a single tensor; dense runs are
// vectorised (DenseLoops.h).  bfloat16 operands are computed in float32 a
// short run at a time (StagedLoops.h), never copied whole.
#include <cmath>
#include <type_traits>

#include "tensor/cpu/DenseLoops.h"
#include "tensor/cpu/StagedLoops.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace cpu {

namespace {

using native::BinaryOp;

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

// A bfloat16 out from bfloat16 (or float32 scalar) operands, in float32.
template <typename Op>
void run_bfloat16(const Op& op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if constexpr (optable::binary_accepts<Op, float>()) {
    staged_map<2>(out, {&a, &b}, [op](float* o, const std::array<const float*, 2>& in, int64_t n) {
      const float* x = in[0];
      const float* y = in[1];
#pragma omp simd
      for (int64_t k = 0; k < n; ++k) o[k] = op.template forward<float>(x[k], y[k]);
    });
  } else {
    LOOM_FAIL(Op::name, ": no kernel for ", a.describe());
  }
}

}  // namespace

void binary_kernel(BinaryOp id, const Tensor& out, const Tensor& a, const Tensor& b,
                   Scalar alpha) {
  native::visit_binary_op(id, [&](auto op_tag) {
    using Op = typename decltype(op_tag)::type;
    const Op op = optable::make_op<Op>(optable::BinaryArgs{alpha.to_double()});
    if (out.dtype() == kBFloat16) return run_bfloat16(op, out, a, b);
    dispatch_dtype(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (optable::binary_accepts<Op, T>()) {
        using Out = decltype(op.template forward<T>(T(), T()));
        if constexpr (std::is_same_v<Op, optable::Pow> && std::is_floating_point_v<T>) {
          // x ** 2 by a broadcast scalar (x.pow(2) through a tensor) skips std::pow.
          if (is_broadcast_scalar(b) && *static_cast<const T*>(b.data_ptr()) == T(2))
            return simd_map<T, T>(out, a, [](T x) { return x * x; });
        }
        run<Out, T>(out, a, b, [op](T x, T y) { return op.template forward<T>(x, y); });
      } else {
        LOOM_FAIL(Op::name, ": no kernel for ", a.describe());
      }
    });
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

// The elementwise kernels (here and Unary.cpp) take bfloat16 as it is.
bool elementwise_takes_kernel(DType dtype) { return dtype == kBFloat16; }

static const native::RegisterKernel reg_binary(native::binary_stub, kCPU, &binary_kernel);
static const native::RegisterKernel reg_isclose(native::isclose_stub, kCPU, &isclose_kernel);
static const native::RegisterKernel reg_elementwise_takes(native::elementwise_takes_stub, kCPU,
                                                          &elementwise_takes_kernel);

}  // namespace cpu
}  // namespace loom
