// CPU dropout: a counter-based hash (splitmix64 of seed and index) decides
// each element, so the loop parallelises without sharing generator state.
#include <cstdint>

#include "tensor/Parallel.h"
#include "tensor/native/Dropout.h"

namespace loom {
namespace cpu {

namespace {

// The i-th output of a splitmix64 sequence started at `seed`.
inline uint64_t splitmix64(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

void dropout_kernel(const Tensor& out, const Tensor& mask, const Tensor& x, double p,
                    uint64_t seed) {
  dispatch_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = static_cast<T*>(out.data_ptr());
    T* m = static_cast<T*>(mask.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T scale = p < 1 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
    parallel_for(0, x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const double u = static_cast<double>(splitmix64(seed, static_cast<uint64_t>(i)) >> 11) *
                         0x1.0p-53;  // uniform in [0, 1)
        const T keep = u >= p ? scale : T(0);
        m[i] = keep;
        o[i] = xp[i] * keep;
      }
    });
  });
}

}  // namespace cpu
}  // namespace loom
