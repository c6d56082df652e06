// Elementwise loops whose contiguous runs are vectorised, for the elementwise
// kernels (tensor/cpu/Unary.cpp, Binary.cpp).
//
// The build's -O2 leaves most plain loops scalar, so dense runs are written
// as `omp simd` loops (or handed to a caller's dense routine, e.g. Eigen's
// SIMD exp); strided runs go element by element.  Operands share out's shape
// (broadcast with expand first), and cpu::for_each_run splits the work over
// the intra-op threads.  out may alias an input exactly (in place).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "tensor/cpu/Loops.h"

namespace loom {
namespace cpu {

// Whether every operand is contiguous (they share one shape), so the whole
// range is one dense run and no strided plan is needed (the common case,
// and for small tensors the plan's bookkeeping would cost more than the op).
inline bool all_contiguous(std::initializer_list<const Tensor*> ops) {
  for (const Tensor* t : ops)
    if (!t->is_contiguous()) return false;
  return true;
}

// Calls run(begin, end) over [0, numel) split over the intra-op threads.
template <typename Run>
void dense_for(int64_t numel, const Run& run) {
  parallel_for(0, numel, kElementwiseGrain, run);
}

// out = f(in): dense(o, i, n) on runs where both are contiguous, elem(x)
// per element elsewhere.
template <typename Out, typename In, typename Dense, typename Elem>
void unary_loop(const Tensor& out, const Tensor& in, const Dense& dense, const Elem& elem) {
  if (all_contiguous({&out, &in})) {
    Out* o = static_cast<Out*>(out.data_ptr());
    const In* i = static_cast<const In*>(in.data_ptr());
    return dense_for(out.numel(), [&](int64_t b, int64_t e) { dense(o + b, i + b, e - b); });
  }
  const StridedPlan<2> plan = make_plan<2>({&out, &in});
  for_each_run<2>(plan, kElementwiseGrain,
                  [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
                    if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
                      dense(reinterpret_cast<Out*>(p[0]), reinterpret_cast<const In*>(p[1]), n);
                      return;
                    }
                    for (int64_t k = 0; k < n; ++k)
                      *reinterpret_cast<Out*>(p[0] + k * s[0]) =
                          elem(*reinterpret_cast<const In*>(p[1] + k * s[1]));
                  });
}

// out = f(in) with an f simple enough for `omp simd`.
template <typename Out, typename In, typename F>
void simd_map(const Tensor& out, const Tensor& in, const F& f) {
  unary_loop<Out, In>(
      out, in,
      [&f](Out* o, const In* i, int64_t n) {
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) o[k] = f(i[k]);
      },
      f);
}

// out = f(a, b).
template <typename Out, typename A, typename B, typename F>
void simd_map(const Tensor& out, const Tensor& a, const Tensor& b, const F& f) {
  if (all_contiguous({&out, &a, &b})) {
    Out* o = static_cast<Out*>(out.data_ptr());
    const A* x = static_cast<const A*>(a.data_ptr());
    const B* y = static_cast<const B*>(b.data_ptr());
    return dense_for(out.numel(), [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t k = begin; k < end; ++k) o[k] = f(x[k], y[k]);
    });
  }
  const StridedPlan<3> plan = make_plan<3>({&out, &a, &b});
  for_each_run<3>(plan, kElementwiseGrain,
                  [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
                    Out* o = reinterpret_cast<Out*>(p[0]);
                    const A* x = reinterpret_cast<const A*>(p[1]);
                    const B* y = reinterpret_cast<const B*>(p[2]);
                    if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == sizeof(B)) {
#pragma omp simd
                      for (int64_t k = 0; k < n; ++k) o[k] = f(x[k], y[k]);
                      return;
                    }
                    // One operand constant along the run, e.g. a per-channel
                    // bias over (N, C, H, W): hoist it out of the loop.
                    if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == 0) {
                      const B c = *y;
#pragma omp simd
                      for (int64_t k = 0; k < n; ++k) o[k] = f(x[k], c);
                      return;
                    }
                    if (s[0] == sizeof(Out) && s[1] == 0 && s[2] == sizeof(B)) {
                      const A c = *x;
#pragma omp simd
                      for (int64_t k = 0; k < n; ++k) o[k] = f(c, y[k]);
                      return;
                    }
                    for (int64_t k = 0; k < n; ++k)
                      *reinterpret_cast<Out*>(p[0] + k * s[0]) =
                          f(*reinterpret_cast<const A*>(p[1] + k * s[1]),
                            *reinterpret_cast<const B*>(p[2] + k * s[2]));
                  });
}

// out = f(a, b, c).
template <typename Out, typename A, typename B, typename C, typename F>
void simd_map(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const F& f) {
  if (all_contiguous({&out, &a, &b, &c})) {
    Out* o = static_cast<Out*>(out.data_ptr());
    const A* x = static_cast<const A*>(a.data_ptr());
    const B* y = static_cast<const B*>(b.data_ptr());
    const C* z = static_cast<const C*>(c.data_ptr());
    return dense_for(out.numel(), [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t k = begin; k < end; ++k) o[k] = f(x[k], y[k], z[k]);
    });
  }
  const StridedPlan<4> plan = make_plan<4>({&out, &a, &b, &c});
  for_each_run<4>(plan, kElementwiseGrain,
                  [&](const std::array<char*, 4>& p, const std::array<int64_t, 4>& s, int64_t n) {
                    if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == sizeof(B) &&
                        s[3] == sizeof(C)) {
                      Out* o = reinterpret_cast<Out*>(p[0]);
                      const A* x = reinterpret_cast<const A*>(p[1]);
                      const B* y = reinterpret_cast<const B*>(p[2]);
                      const C* z = reinterpret_cast<const C*>(p[3]);
#pragma omp simd
                      for (int64_t k = 0; k < n; ++k) o[k] = f(x[k], y[k], z[k]);
                      return;
                    }
                    for (int64_t k = 0; k < n; ++k)
                      *reinterpret_cast<Out*>(p[0] + k * s[0]) =
                          f(*reinterpret_cast<const A*>(p[1] + k * s[1]),
                            *reinterpret_cast<const B*>(p[2] + k * s[2]),
                            *reinterpret_cast<const C*>(p[3] + k * s[3]));
                  });
}

// Whether t is one value broadcast everywhere (every stride of a dim of size
// > 1 is 0), e.g. an expanded 0-dim tensor.
inline bool is_broadcast_scalar(const Tensor& t) {
  if (t.numel() == 0) return false;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[d] != 1 && t.strides()[d] != 0) return false;
  return true;
}

}  // namespace cpu
}  // namespace loom
