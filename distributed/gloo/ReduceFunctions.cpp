#include "distributed/gloo/ReduceFunctions.h"

#include <algorithm>

#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace gloo_glue {
namespace {

struct Sum {
  template <typename T> static T apply(T a, T b) { return static_cast<T>(a + b); }
};
struct Product {
  template <typename T> static T apply(T a, T b) { return static_cast<T>(a * b); }
};
struct Min {
  template <typename T> static T apply(T a, T b) { return std::min(a, b); }
};
struct Max {
  template <typename T> static T apply(T a, T b) { return std::max(a, b); }
};
struct Or {
  static bool apply(bool a, bool b) { return a || b; }
};
struct And {
  static bool apply(bool a, bool b) { return a && b; }
};

template <typename T, typename Op>
void reduce_loop(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = Op::apply(x[i], y[i]);
}

template <typename T>
ReduceFn numeric_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return &reduce_loop<T, Sum>;
    case ReduceOp::Product: return &reduce_loop<T, Product>;
    case ReduceOp::Min: return &reduce_loop<T, Min>;
    case ReduceOp::Max: return &reduce_loop<T, Max>;
  }
  LOOM_FAIL("ProcessGroupGloo: unknown reduce op ", static_cast<int>(op));
}

}  // namespace

ReduceFn reduce_function(DType dtype, ReduceOp op) {
  LOOM_CHECK(op != ReduceOp::Avg || is_floating_point(dtype),
             "ProcessGroupGloo: reduce op avg needs a floating-point tensor (float16, "
             "bfloat16, float32 or float64), got ",
             dtype_name(dtype), "; reduce with sum and divide yourself");
  if (dtype == kBool) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Max: return &reduce_loop<bool, Or>;
      case ReduceOp::Product:
      case ReduceOp::Min: return &reduce_loop<bool, And>;
      case ReduceOp::Avg: break;
    }
    LOOM_FAIL("ProcessGroupGloo: reduce op ", to_string(op), " is not defined for bool");
  }
  // float16/bfloat16: each pairwise reduction computes in float and rounds.
  if (dtype == kFloat16) return numeric_function<Half>(op);
  if (dtype == kBFloat16) return numeric_function<BFloat16>(op);
  return dispatch_numeric(dtype, "ProcessGroupGloo reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return numeric_function<T>(op);
  });
}

void divide_in_place(void* data, DType dtype, size_t n, double divisor) {
  if (is_reduced_float(dtype)) {
    dispatch_all_dtypes(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = static_cast<T*>(data);
      const float d = static_cast<float>(divisor);
      for (size_t i = 0; i < n; ++i) p[i] = T(static_cast<float>(p[i]) / d);
    });
    return;
  }
  dispatch_floating(dtype, "ProcessGroupGloo avg", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(data);
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) p[i] /= d;
  });
}

}  // namespace gloo_glue
}  // namespace distributed
}  // namespace loom
