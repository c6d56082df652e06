// Host arithmetic shared by the emulated CUDA libraries (Cublas.cpp,
// Cudnn*.cpp, Nccl*.cpp): the 16-bit float formats, TF32 input rounding and a
// small parallel loop.  Internal to tools/cuda/emu/src.
//
// float16 is IEEE binary16 and bfloat16 the top half of an IEEE binary32;
// in device memory both are uint16_t bit patterns, as __half and
// __nv_bfloat16 store them.  Conversions to them round to nearest, ties to
// even, handle infinities, NaN (kept quiet) and subnormals, as the GPU's
// cvt.rn instructions do.  TF32 is float32 with a 10-bit mantissa; tensor
// cores see float32 inputs rounded to it (here: to nearest, ties away from
// zero, as cvt.rna.tf32.f32).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace loom_emu {
namespace libs {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---- float16 -------------------------------------------------------------------------------

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return bits_float(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) {  // inf or NaN (NaN stays a quiet NaN, top payload bits kept)
    if (ax == 0x7F800000u) return sign | 0x7C00u;
    return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  }
  if (ax >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520: rounds to infinity
  if (ax < 0x38800000u) {                        // below 2^-14: a subnormal half or zero
    if (ax <= 0x33000000u) return sign;          // <= 2^-25 (a tie goes to even: zero)
    const uint32_t exponent = ax >> 23;
    const uint32_t mantissa = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t m = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (m & 1u))) ++m;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t h = (ax - 0x38000000u) >> 13;  // exponent rebiased from 127 to 15
  const uint32_t rest = ax & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// ---- bfloat16 ------------------------------------------------------------------------------

inline float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// ---- TF32 ----------------------------------------------------------------------------------

inline float round_to_tf32(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7F800000u) == 0x7F800000u) return f;  // inf, NaN
  x = (x + 0x1000u) & 0xFFFFE000u;
  return bits_float(x);
}

// NVIDIA_TF32_OVERRIDE=0 turns TF32 off in every library, as on a GPU.
inline bool tf32_disabled_by_environment() {
  static const bool disabled = [] {
    const char* v = std::getenv("NVIDIA_TF32_OVERRIDE");
    return v != nullptr && std::string(v) == "0";
  }();
  return disabled;
}

// ---- parallel loop -------------------------------------------------------------------------

// Runs fn(begin, end) over [0, n) in contiguous chunks, on several host
// threads when the whole job (n * cost_per_item, roughly multiply-adds) is
// big enough to pay for them.  Each index is handled by exactly one call, so
// results do not depend on the number of threads.
template <typename Fn>
void parallel_for(int64_t n, double cost_per_item, const Fn& fn) {
  if (n <= 0) return;
  const double total = static_cast<double>(n) * cost_per_item;
  static const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  int threads = static_cast<int>(std::min<double>(hardware, total / (1 << 18)));
  threads = static_cast<int>(std::min<int64_t>(threads, n));
  if (threads <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  const int64_t chunk = (n + threads - 1) / threads;
  for (int t = 1; t < threads; ++t) {
    const int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin >= end) break;
    pool.emplace_back([&fn, begin, end] { fn(begin, end); });
  }
  fn(int64_t{0}, std::min(n, chunk));
  for (std::thread& t : pool) t.join();
}

}  // namespace libs
}  // namespace loom_emu
