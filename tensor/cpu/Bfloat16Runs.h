// Contiguous runs of bfloat16 widened to float32 and float32 rounded to
// bfloat16 (and a gradient run loaded through a ReLU's mask), in loops the
// compiler vectorises (`omp simd` on the bits: GCC's -O2 cost model leaves
// the element-by-element conversions of Half.h scalar, 11x slower when
// narrowing).  The same bits as half_bits: round to nearest
// even, NaN to 0xFFFF (PyTorch 1.13's CPU kernels); widening is exact.
// Serial: callers split the work (parallel_for) or run them on chunks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/Half.h"

namespace loom {
namespace cpu {

inline void widen_bfloat16(const BFloat16* src, float* dst, int64_t n) {
  const uint16_t* x = reinterpret_cast<const uint16_t*>(src);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(x[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);  // a bit cast: the buffer stays float to the compiler
    dst[i] = f;
  }
}

// The bfloat16 bits of f: rounded to nearest even, NaN to 0xFFFF.
inline uint16_t bfloat16_bits(float f) {
  uint32_t v;
  std::memcpy(&v, &f, sizeof v);  // read as float, not through a uint32_t alias
  const uint32_t rounded = (v + 0x7FFFu + ((v >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((v & 0x7FFFFFFFu) > 0x7F800000u ? 0xFFFFu : rounded);
}

inline void narrow_to_bfloat16(const float* src, BFloat16* dst, int64_t n) {
  uint16_t* out = reinterpret_cast<uint16_t*>(dst);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = bfloat16_bits(src[i]);
}

// v rounded to bfloat16 as narrow_to_bfloat16 rounds it, widened back: what
// a bfloat16 tensor would hold in between two fused steps.
inline float round_through_bfloat16(float v) {
  const uint32_t bits = static_cast<uint32_t>(bfloat16_bits(v)) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// n values of a run of T as A, for kernels computing bfloat16 in float32
// and float32/float64 as they are: p itself when T is A, else (T =
// BFloat16, A = float) widened into buf.
template <typename A, typename T>
const A* load_run(const T* p, int64_t n, A* buf) {
  if constexpr (std::is_same_v<T, A>) {
    return p;
  } else {
    static_assert(std::is_same_v<T, BFloat16> && std::is_same_v<A, float>);
    widen_bfloat16(p, buf, n);
    return buf;
  }
}

// Writes n values computed in A to a run of T (rounded once for bfloat16).
template <typename A, typename T>
void store_run(const A* v, int64_t n, T* p) {
  if constexpr (std::is_same_v<T, A>) {
    std::copy(v, v + n, p);
  } else {
    static_assert(std::is_same_v<T, BFloat16> && std::is_same_v<A, float>);
    narrow_to_bfloat16(v, p, n);
  }
}

// n values of a gradient run dy as A, through a ReLU's mask when y (the
// ReLU's output, same layout) is given: dy where y > 0, else 0 (a NaN output
// masks too, as ReLU's backward does).  Without y, load_run(dy).  The masked
// values land in gbuf; ybuf holds y's widened values for bfloat16.
template <typename A, typename T>
const A* load_relu_grad(const T* dy, const T* y, int64_t n, A* gbuf, A* ybuf) {
  const A* g = load_run<A>(dy, n, gbuf);
  if (y == nullptr) return g;
  const A* v = load_run<A>(y, n, ybuf);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) gbuf[i] = v[i] > A(0) ? g[i] : A(0);
  return gbuf;
}

}  // namespace cpu
}  // namespace loom
