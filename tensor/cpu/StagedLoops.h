// Elementwise loops over bfloat16 tensors that compute in float32 without
// float32 copies of the tensors, for the elementwise kernels' bfloat16 path
// (tensor/cpu/Unary.cpp, Binary.cpp).
//
// Each run of the strided plan (Loops.h) is staged in pieces of kStage
// values: every input's piece is widened into a float32 buffer on the stack
// (a contiguous float32 input is read where it is), the kernel's dense
// float32 routine computes the piece, and the result is rounded once into
// the bfloat16 output.  The values are those of widening the whole tensors,
// running the float32 kernel and rounding (native::compute_dtype's path),
// at a sixth of the memory traffic and with no allocation.  Inputs may be
// bfloat16 or float32 (a float32 scalar operand beside bfloat16, `x * 0.1`,
// stays float32 as in PyTorch); out may alias an input exactly (in place):
// a piece is read whole before it is written.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "tensor/cpu/Bfloat16Runs.h"
#include "tensor/cpu/Loops.h"

namespace loom {
namespace cpu {

constexpr int64_t kStage = 256;  // 1 KiB of float32 per operand: stays in L1

// The next m values of an input run (stride in bytes) as float32: a pointer
// into the tensor itself for a contiguous float32 run, else `buf` filled.
inline const float* stage_input(bool bfloat16, const char* p, int64_t stride, int64_t m,
                                float* buf) {
  if (bfloat16) {
    if (stride == static_cast<int64_t>(sizeof(BFloat16))) {
      widen_bfloat16(reinterpret_cast<const BFloat16*>(p), buf, m);
    } else if (stride == 0) {
      std::fill_n(buf, m, static_cast<float>(*reinterpret_cast<const BFloat16*>(p)));
    } else {
      for (int64_t k = 0; k < m; ++k)
        buf[k] = static_cast<float>(*reinterpret_cast<const BFloat16*>(p + k * stride));
    }
    return buf;
  }
  if (stride == static_cast<int64_t>(sizeof(float))) return reinterpret_cast<const float*>(p);
  if (stride == 0) {
    std::fill_n(buf, m, *reinterpret_cast<const float*>(p));
  } else {
    for (int64_t k = 0; k < m; ++k) buf[k] = *reinterpret_cast<const float*>(p + k * stride);
  }
  return buf;
}

// Rounds m float32 results into a bfloat16 output run.
inline void stage_output(const float* buf, char* p, int64_t stride, int64_t m) {
  if (stride == static_cast<int64_t>(sizeof(BFloat16))) {
    narrow_to_bfloat16(buf, reinterpret_cast<BFloat16*>(p), m);
    return;
  }
  for (int64_t k = 0; k < m; ++k) *reinterpret_cast<BFloat16*>(p + k * stride) = BFloat16(buf[k]);
}

// out (bfloat16) = dense(o, in, m) over every element, where dense computes
// o[k] from in[j][k] (float32, j < N) for k < m <= kStage.  The inputs share
// out's shape (broadcast with expand first) and are bfloat16 or float32.
template <size_t N, typename Dense>
void staged_map(const Tensor& out, const std::array<const Tensor*, N>& ins, const Dense& dense) {
  LOOM_CHECK(out.dtype() == kBFloat16, "staged_map: expected a bfloat16 output, got ",
             out.describe());
  std::array<const Tensor*, N + 1> ops;
  std::array<bool, N> bfloat16;
  ops[0] = &out;
  for (size_t j = 0; j < N; ++j) {
    LOOM_CHECK(ins[j]->dtype() == kBFloat16 || ins[j]->dtype() == kFloat32,
               "staged_map: expected bfloat16 or float32 inputs, got ", ins[j]->describe());
    ops[j + 1] = ins[j];
    bfloat16[j] = ins[j]->dtype() == kBFloat16;
  }
  const StridedPlan<N + 1> plan = make_plan<N + 1>(ops);
  for_each_run<N + 1>(plan, kElementwiseGrain, [&](const std::array<char*, N + 1>& p,
                                                   const std::array<int64_t, N + 1>& s,
                                                   int64_t n) {
    alignas(64) float result[kStage];
    alignas(64) float staged[N][kStage];
    std::array<const float*, N> in;
    for (int64_t b = 0; b < n; b += kStage) {
      const int64_t m = std::min(kStage, n - b);
      for (size_t j = 0; j < N; ++j)
        in[j] = stage_input(bfloat16[j], p[j + 1] + b * s[j + 1], s[j + 1], m, staged[j]);
      dense(result, in, m);
      stage_output(result, p[0] + b * s[0], s[0], m);
    }
  });
}

}  // namespace cpu
}  // namespace loom
