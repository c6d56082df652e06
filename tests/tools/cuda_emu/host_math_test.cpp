// The CUDA emulator's host arithmetic (tools/cuda/emu/src/HostMath.h), which
// its cuBLAS, cuDNN and NCCL use for 16-bit floats and TF32, against oracles:
// GCC's _Float16 (round to nearest even, as the GPU's cvt.rn.f16.f32) for
// float16, a nearest-neighbour search for bfloat16, and hand-worked cases for
// TF32 (round to nearest, ties away from zero, as cvt.rna.tf32.f32).  Every
// 16-bit pattern, every float16 midpoint and its neighbours, and 2 million
// random float bit patterns per format; plus parallel_for's coverage.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tools/cuda/emu/src/HostMath.h"

namespace {

using loom_emu::libs::bf16_to_float;
using loom_emu::libs::bits_float;
using loom_emu::libs::float_bits;
using loom_emu::libs::float_to_bf16;
using loom_emu::libs::float_to_half;
using loom_emu::libs::half_to_float;
using loom_emu::libs::round_to_tf32;

uint16_t oracle_half(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

float oracle_half_to_float(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

// The bfloat16 nearest to f (ties to even), by comparing the two around truncation.
uint16_t oracle_bf16(float f) {
  const uint16_t lo = static_cast<uint16_t>(float_bits(f) >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  if (std::isinf(bf16_to_float(hi))) {
    // Past the largest finite bfloat16: infinity from the halfway point on.
    const double largest = std::fabs(bf16_to_float(lo));
    const double halfway = largest + std::ldexp(1.0, 127 - 7) / 2;
    return std::fabs(static_cast<double>(f)) >= halfway ? hi : lo;
  }
  const double dlo = std::fabs(static_cast<double>(f) - bf16_to_float(lo));
  const double dhi = std::fabs(static_cast<double>(f) - bf16_to_float(hi));
  if (dlo != dhi) return dlo < dhi ? lo : hi;
  return (lo & 1u) ? hi : lo;
}

bool is_half_nan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }

// Equal bit patterns, or both NaN (payloads may differ).
bool same_half(uint16_t a, uint16_t b) {
  return is_half_nan(a) || is_half_nan(b) ? is_half_nan(a) == is_half_nan(b) : a == b;
}

TEST(Float16Test, EveryFloat16ConvertsToFloatExactlyAndBack) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    const float o = oracle_half_to_float(static_cast<uint16_t>(h));
    if (!(f == o || (std::isnan(f) && std::isnan(o)))) ++bad;
    if (!std::isnan(f) && std::signbit(f) != std::signbit(o)) ++bad;
    if (!same_half(float_to_half(f), static_cast<uint16_t>(h))) ++bad;
  }
  EXPECT_EQ(0, bad);
}

TEST(Float16Test, FloatsAtAndAroundEveryMidpointRoundToNearestEven) {
  int bad = 0;
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const double a = half_to_float(static_cast<uint16_t>(h));
    const double b = half_to_float(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((a + b) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      if (float_to_half(f) != oracle_half(f)) ++bad;
      if (float_to_half(-f) != oracle_half(-f)) ++bad;
    }
  }
  EXPECT_EQ(0, bad);
}

TEST(Float16Test, RandomFloatBitPatternsRoundAsTheOracle) {
  std::mt19937 rng(7);
  int bad = 0;
  for (int i = 0; i < 2000000; ++i) {
    const float f = bits_float(rng());
    if (!same_half(float_to_half(f), oracle_half(f))) ++bad;
  }
  EXPECT_EQ(0, bad);
}

TEST(Float16Test, OverflowSubnormalsSignedZeroAndNaN) {
  EXPECT_EQ(0x7BFF, float_to_half(65504.0f));
  EXPECT_EQ(0x7BFF, float_to_half(65519.99f));
  EXPECT_EQ(0x7C00, float_to_half(65520.0f)) << "the halfway point to 2^16 rounds to infinity";
  EXPECT_EQ(0xFC00, float_to_half(-1e10f));
  EXPECT_EQ(0x7C00, float_to_half(std::numeric_limits<float>::infinity()));
  EXPECT_EQ(0x0001, float_to_half(std::ldexp(1.0f, -24))) << "the smallest subnormal";
  EXPECT_EQ(0x0000, float_to_half(std::ldexp(1.0f, -25))) << "half of it: a tie to even (zero)";
  EXPECT_EQ(0x0001, float_to_half(std::ldexp(1.5f, -25)));
  EXPECT_EQ(0x0400, float_to_half(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)))
      << "rounds up into the smallest normal";
  EXPECT_EQ(0x8000, float_to_half(-0.0f));
  EXPECT_EQ(0x7E00u, float_to_half(std::numeric_limits<float>::quiet_NaN()) & 0x7E00u);
  EXPECT_TRUE(std::isnan(half_to_float(0x7E01)));
  EXPECT_EQ(std::ldexp(1.0f, -24), half_to_float(0x0001));
  EXPECT_EQ(-2.0f, half_to_float(0xC000));
}

TEST(Bfloat16Test, EveryBfloat16RoundTripsThroughFloat) {
  int bad = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_float(static_cast<uint16_t>(b));
    const uint16_t back = float_to_bf16(f);
    if (std::isnan(f) ? !std::isnan(bf16_to_float(back)) : back != b) ++bad;
  }
  EXPECT_EQ(0, bad);
}

TEST(Bfloat16Test, RandomFloatBitPatternsRoundToNearestEven) {
  std::mt19937 rng(11);
  int bad = 0;
  for (int i = 0; i < 2000000; ++i) {
    const float f = bits_float(rng());
    if (std::isnan(f)) {
      if (!std::isnan(bf16_to_float(float_to_bf16(f)))) ++bad;
      continue;
    }
    if (float_to_bf16(f) != oracle_bf16(f)) ++bad;
  }
  EXPECT_EQ(0, bad);
}

TEST(Bfloat16Test, TiesGoToEvenAndOverflowGoesToInfinity) {
  EXPECT_EQ(0x3F80, float_to_bf16(1.0f + std::ldexp(1.0f, -8)));
  EXPECT_EQ(0x3F82, float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)));
  EXPECT_EQ(0x7F80, float_to_bf16(std::numeric_limits<float>::max()));
  EXPECT_EQ(0xFF80, float_to_bf16(-std::numeric_limits<float>::infinity()));
  // A NaN whose payload sits in the dropped bits stays NaN.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_float(0x7F800001u)))));
}

TEST(Tf32Test, KeepsTenMantissaBitsRoundingTiesAwayFromZero) {
  EXPECT_EQ(1.0f + std::ldexp(1.0f, -10), round_to_tf32(1.0f + std::ldexp(1.0f, -11)));
  EXPECT_EQ(-(1.0f + std::ldexp(1.0f, -10)), round_to_tf32(-(1.0f + std::ldexp(1.0f, -11))));
  EXPECT_EQ(1.0f, round_to_tf32(1.0f + std::ldexp(1.0f, -12)));
  EXPECT_EQ(-3.0f, round_to_tf32(-3.0f));
  EXPECT_TRUE(std::isinf(round_to_tf32(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(round_to_tf32(std::numeric_limits<float>::quiet_NaN())));
  std::mt19937 rng(3);
  for (int i = 0; i < 10000; ++i) {
    const uint32_t exponent = 1 + rng() % 254;  // normal numbers
    const float f = bits_float((rng() & 0x807FFFFFu) | (exponent << 23));
    const float r = round_to_tf32(f);
    ASSERT_EQ(0u, float_bits(r) & 0x1FFFu) << f;
    ASSERT_LE(std::fabs(static_cast<double>(r) - f), std::ldexp(std::fabs(f), -11)) << f;
  }
}

TEST(ParallelForTest, CallsEachIndexExactlyOnceWhateverTheCost) {
  for (double cost : {1.0, 1e6}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      for (auto& s : seen) s = 0;
      loom_emu::libs::parallel_for(n, cost, [&](int64_t begin, int64_t end) {
        ASSERT_LE(0, begin);
        ASSERT_LE(begin, end);
        ASSERT_LE(end, n);
        for (int64_t i = begin; i < end; ++i) ++seen[static_cast<size_t>(i)];
      });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(1, seen[static_cast<size_t>(i)].load()) << "n " << n << " cost " << cost;
    }
  }
}

}  // namespace
