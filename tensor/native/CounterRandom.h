// Counter-based random fills for large CPU tensors.
//
// Drawing element after element from the Generator's mt19937_64 is serial:
// building a ResNet-50 (25M normal draws) took about a second on one core.
// Here element i of a fill is a pure function of (key, i): Philox4x32-10
// (tensor/cuda/Philox.h) turns the pair index i / 2 into two 64-bit words,
// i.e. two 53-bit uniforms, which are either elements 2j and 2j+1 themselves
// (uniform) or a Box-Muller pair (normal).  So the fill splits over the
// intra-op threads and gives the same values for any thread count.  The key
// is one draw from the Generator: a seed still fixes every value, and the
// generator advances by one draw whatever the tensor's size.
//
// Fills below kCounterRandomMinNumel elements keep drawing from the
// Generator's own sequence (their values are unchanged from before).
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/Generator.h"
#include "tensor/Parallel.h"
#include "tensor/cuda/Philox.h"

namespace loom {
namespace native {

constexpr int64_t kCounterRandomMinNumel = int64_t{1} << 16;

// The key of one counter-based fill: one draw of `gen`, under its lock.
inline uint64_t counter_key(Generator& gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.next_u64();
}

// The two uniforms in [0, 1) of pair j of the stream `key`.
inline void counter_uniform_pair(uint64_t key, uint64_t j, double& a, double& b) {
  const philox::Counter c = philox::draw(key, 0, j);
  const uint64_t w0 = (static_cast<uint64_t>(c.v[1]) << 32) | c.v[0];
  const uint64_t w1 = (static_cast<uint64_t>(c.v[3]) << 32) | c.v[2];
  a = static_cast<double>(w0 >> 11) * 0x1.0p-53;
  b = static_cast<double>(w1 >> 11) * 0x1.0p-53;
}

// p[i] = map(u_i) for i in [0, n), u_i uniform in [0, 1).  Map: double -> double.
template <typename T, typename Map>
void counter_fill_uniform(T* p, int64_t n, uint64_t key, const Map& map) {
  const int64_t pairs = (n + 1) / 2;
  parallel_for(0, pairs, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      double a, b;
      counter_uniform_pair(key, static_cast<uint64_t>(j), a, b);
      p[2 * j] = static_cast<T>(map(a));
      if (2 * j + 1 < n) p[2 * j + 1] = static_cast<T>(map(b));
    }
  });
}

// p[i] = mean + std * z_i, z_i standard normal (Box-Muller on pair i / 2).
template <typename T>
void counter_fill_normal(T* p, int64_t n, uint64_t key, double mean, double std) {
  const int64_t pairs = (n + 1) / 2;
  parallel_for(0, pairs, 1 << 13, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      double u1, u2;
      counter_uniform_pair(key, static_cast<uint64_t>(j), u1, u2);
      if (u1 < 1e-300) u1 = 1e-300;
      const double r = std::sqrt(-2.0 * std::log(u1));
      double sin_theta, cos_theta;
      ::sincos(2.0 * M_PI * u2, &sin_theta, &cos_theta);  // one call for both
      p[2 * j] = static_cast<T>(mean + std * r * cos_theta);
      if (2 * j + 1 < n) p[2 * j + 1] = static_cast<T>(mean + std * r * sin_theta);
    }
  });
}

}  // namespace native
}  // namespace loom
