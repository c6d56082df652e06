// Philox4x32-10: the counter-based random generator of Salmon et al., "Parallel
// Random Numbers: As Easy as 1, 2, 3" (SC'11), usable from host and device code.
//
// Why counter-based: the output is a pure function of (key, counter), so every
// CUDA thread computes its own numbers without shared state, and any draw can be
// recomputed later (dropout's backward and activation checkpointing replay the
// same mask from the same generator state).  Each call turns a 128-bit counter
// and a 64-bit key into four 32-bit words; ten rounds of two 32x32->64
// multiplies, with the key bumped by the Weyl constants between rounds.
//
// The header is plain C++ with LOOM_HOST_DEVICE on every function: empty under
// g++ (so CPU tests check the Random123 known-answer vectors in CI) and
// `__host__ __device__` under nvcc.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

namespace loom {
namespace philox {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;
constexpr int kRounds = 10;

struct Counter {
  uint32_t v[4];
};
struct Key {
  uint32_t v[2];
};

// The high and low 32 bits of a * b.
LOOM_HOST_DEVICE inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

LOOM_HOST_DEVICE inline Counter round(const Counter& c, const Key& k) {
  uint32_t hi0, lo0, hi1, lo1;
  mulhilo(kMul0, c.v[0], hi0, lo0);
  mulhilo(kMul1, c.v[2], hi1, lo1);
  Counter r;
  r.v[0] = hi1 ^ c.v[1] ^ k.v[0];
  r.v[1] = lo1;
  r.v[2] = hi0 ^ c.v[3] ^ k.v[1];
  r.v[3] = lo0;
  return r;
}

// Philox4x32 with `rounds` rounds (10 is the standard, crush-resistant choice).
LOOM_HOST_DEVICE inline Counter philox4x32(Counter c, Key k, int rounds = kRounds) {
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      k.v[0] += kWeyl0;
      k.v[1] += kWeyl1;
    }
    c = round(c, k);
  }
  return c;
}

// The four words for element group `index` of the stream (seed, offset): key =
// seed, counter = (index, offset) as two 64-bit halves.  Element i of a
// tensor uses word i % 4 of group i / 4.
LOOM_HOST_DEVICE inline Counter draw(uint64_t seed, uint64_t offset, uint64_t index) {
  Counter c;
  c.v[0] = static_cast<uint32_t>(index);
  c.v[1] = static_cast<uint32_t>(index >> 32);
  c.v[2] = static_cast<uint32_t>(offset);
  c.v[3] = static_cast<uint32_t>(offset >> 32);
  Key k;
  k.v[0] = static_cast<uint32_t>(seed);
  k.v[1] = static_cast<uint32_t>(seed >> 32);
  return philox4x32(c, k);
}

}  // namespace philox
}  // namespace loom
