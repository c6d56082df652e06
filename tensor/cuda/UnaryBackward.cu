// CUDA kernels for the fused backward rules of tensor/native/Unary.h
// (unary_backward, pow_backward, clamp_backward; see Elementwise.h).  Floating
// dtypes only; the unary ops' formulas are the table's (UnaryOps.h), pow's
// and clamp's the CPU kernel's (tensor/cpu/Unary.cpp).
#include <limits>
#include <type_traits>

#include "tensor/cuda/Loops.cuh"
#include "tensor/native/UnaryOps.h"

namespace loom {
namespace cuda {
namespace {

// Op::backward of the unary table as a device functor: (grad, saved) -> grad.
template <typename Op, typename T>
struct BackwardF {
  Op op;
  __device__ T operator()(T g, T s) const { return op.template backward<T>(g, s); }
};

// The same for 16-bit S: Op::backward in float32 of the widened operands,
// rounded once.
template <typename Op, typename S>
struct Backward16F {
  Op op;
  __device__ S operator()(S g, S s) const {
    return S(op.template backward<float>(static_cast<float>(g), static_cast<float>(s)));
  }
};

// grad * e * x^(e - 1), with the CPU kernel's exact cases.
template <typename T>
struct PowBackF {
  T e;
  int mode;  // 0: exponent 0, 1: exponent 1, 2, 3: those exponents, else general
  __device__ T operator()(T g, T x) const {
    switch (mode) {
      case 0: return T(0);
      case 1: return g;
      case 2: return T(2) * g * x;
      case 3: return T(3) * g * x * x;
      default: return e * g * ::pow(x, e - T(1));
    }
  }
};

template <typename T>
struct ClampBackF {
  T lo, hi;
  __device__ T operator()(T g, T x) const { return x >= lo && x <= hi ? g : T(0); }
};

struct Launch {
  const ElementwiseLayout& layout;
  void* out;
  const void* grad;
  const void* saved;
  int device;
  uint64_t stream;

  template <typename T, typename F>
  void run(F f) const {
    loops::map2<T, T, T>(layout, out, grad, saved, f, device, stream);
  }
};

}  // namespace

void unary_backward(native::UnaryOp id, const optable::UnaryArgs& args, DType dtype,
                    const ElementwiseLayout& layout, void* out, const void* grad,
                    const void* saved, int device, uint64_t stream) {
  const Launch l{layout, out, grad, saved, device, stream};
  native::visit_unary_op(id, [&](auto op_tag) {
    using Op = typename decltype(op_tag)::type;
    const Op op = optable::make_op<Op>(args);
    if (dtype == kFloat16) return l.run<Half>(Backward16F<Op, Half>{op});
    if (dtype == kBFloat16) return l.run<BFloat16>(Backward16F<Op, BFloat16>{op});
    dispatch_floating(dtype, "cuda::unary_backward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      l.run<T>(BackwardF<Op, T>{op});
    });
  });
}

void pow_backward(DType dtype, const ElementwiseLayout& layout, void* out, const void* grad,
                  const void* self, double exponent, int device, uint64_t stream) {
  const Launch l{layout, out, grad, self, device, stream};
  const int mode = exponent == 0 ? 0 : exponent == 1 ? 1 : exponent == 2 ? 2 : exponent == 3 ? 3 : 4;
  dispatch_floating(dtype, "cuda::pow_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    l.run<T>(PowBackF<T>{static_cast<T>(exponent), mode});
  });
}

void clamp_backward(DType dtype, const ElementwiseLayout& layout, void* out, const void* grad,
                    const void* self, bool has_min, double min, bool has_max, double max,
                    int device, uint64_t stream) {
  const Launch l{layout, out, grad, self, device, stream};
  dispatch_floating(dtype, "cuda::clamp_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T lo = has_min ? static_cast<T>(min) : -std::numeric_limits<T>::infinity();
    const T hi = has_max ? static_cast<T>(max) : std::numeric_limits<T>::infinity();
    l.run<T>(ClampBackF<T>{lo, hi});
  });
}

}  // namespace cuda
}  // namespace loom
