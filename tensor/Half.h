// Half (IEEE float16) and BFloat16: 16-bit storage types that compute as
// float.
//
// Each holds its bits and converts implicitly to and from float, so
// `Half(a) + Half(b)` computes in float and rounds once when stored back, as
// PyTorch's kernels do.  Conversions from float round to nearest, ties to
// even, with PyTorch 1.13's CPU results bit for bit (tests/tensor/
// half_conversion_test.cpp checks all 65,536 patterns of each):
//   float16:  overflow (|x| >= 65520) gives inf; results below 2^-14 are
//             subnormals; NaN gives 0x7E00 with the input's sign.
//   bfloat16: the upper 16 bits rounded; NaN gives 0xFFFF.
//   to float: exact; a NaN keeps its payload with the quiet bit set.
// Both g++ and nvcc compile this header: integer code on the host; on a GPU
// the hardware's conversions (cvt: round to nearest even, subnormals kept,
// overflow to inf -- the same results) in one instruction each, with NaNs
// still taken through the integer code so their bits stay the CPU's.  An
// elementwise float16 kernel is otherwise bound by its integer work, not
// by memory, on an H100/H200.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/HostDevice.h"

namespace loom {
namespace half_bits {

LOOM_HOST_DEVICE inline uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

LOOM_HOST_DEVICE inline float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Shifts `value` right by `shift` (1..31), rounding to nearest, ties to even.
LOOM_HOST_DEVICE inline uint32_t shift_right_rne(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

LOOM_HOST_DEVICE inline uint16_t float16_from_float(float f) {
  const uint32_t x = float_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00u;         // NaN
#if defined(__CUDA_ARCH__)
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  if (abs >= 0x477FF000u) return sign | 0x7C00u;        // >= 65520 (and inf): inf
  if (abs >= 0x38800000u) {                             // normal: >= 2^-14
    // Rebias the exponent (127 -> 15) and round the mantissa's low 13 bits;
    // a carry out of the mantissa correctly bumps the exponent.
    return sign | static_cast<uint16_t>(shift_right_rne(abs - 0x38000000u, 13));
  }
  if (abs < 0x33000000u) return sign;                   // <= 2^-25 (a tie to 0): zero
  // Subnormal: the value in units of 2^-24, from the 24-bit significand.
  const uint32_t exponent = abs >> 23;                  // 102..112
  const uint32_t significand = (abs & 0x7FFFFFu) | 0x800000u;
  return sign | static_cast<uint16_t>(shift_right_rne(significand, 126u - exponent));
#endif
}

LOOM_HOST_DEVICE inline float float_from_float16(uint16_t h) {
#if defined(__CUDA_ARCH__)
  if ((h & 0x7FFFu) <= 0x7C00u) {  // not a NaN: exact in one instruction
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  }
#endif
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) {  // inf, or NaN made quiet
    return bits_to_float(sign | 0x7F800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

LOOM_HOST_DEVICE inline uint16_t bfloat16_from_float(float f) {
  const uint32_t x = float_to_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0xFFFFu;  // NaN, as PyTorch 1.13's CPU kernels
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint16_t b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
#else
  return static_cast<uint16_t>(shift_right_rne(x, 16));  // inf stays inf; overflow rounds to inf
#endif
}

LOOM_HOST_DEVICE inline float float_from_bfloat16(uint16_t b) {
  return bits_to_float(static_cast<uint32_t>(b) << 16);
}

}  // namespace half_bits

struct Half {
  uint16_t bits;

  Half() = default;
  LOOM_HOST_DEVICE Half(float f) : bits(half_bits::float16_from_float(f)) {}  // NOLINT: implicit
  LOOM_HOST_DEVICE operator float() const { return half_bits::float_from_float16(bits); }
  LOOM_HOST_DEVICE static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits;

  BFloat16() = default;
  LOOM_HOST_DEVICE BFloat16(float f) : bits(half_bits::bfloat16_from_float(f)) {}  // NOLINT
  LOOM_HOST_DEVICE operator float() const { return half_bits::float_from_bfloat16(bits); }
  LOOM_HOST_DEVICE static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "16-bit storage types");

}  // namespace loom
