// The window arithmetic shared by the CPU max-pool kernels (the planar ones
// in Pooling.cpp, the channels-last ones in PoolingChannelsLast.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

namespace loom {
namespace cpu {

// First index >= lo on the lattice start + k * step (k >= 0).
inline int64_t first_on_lattice(int64_t start, int64_t step, int64_t lo) {
  if (start >= lo) return start;
  return start + (lo - start + step - 1) / step * step;
}

// The taps of one window along one dim that fall inside the input: the
// positions start + k * dilation (k < kernel) in [0, size), as [begin, end)
// stepping by dilation; start = output index * stride - padding.
struct WindowTaps {
  int64_t begin, end;
};

inline WindowTaps window_taps(int64_t start, int64_t kernel, int64_t dilation, int64_t size) {
  return {first_on_lattice(start, dilation, 0),
          std::min(start + (kernel - 1) * dilation + 1, size)};
}

// Whether v replaces the running max (NaN wins, as in PyTorch).  Written so
// the compiler emits selects: with random data a branch here mispredicts half
// the time and dominates the cost.
template <typename T>
inline void take_max(T v, int64_t at, T& best, int64_t& best_at) {
  const bool take = (v > best) | (v != v);
  best = take ? v : best;
  best_at = take ? at : best_at;
}

}  // namespace cpu
}  // namespace loom
