// CPU dropout: a counter-based hash (splitmix64 of seed and index) decides
// each element, so the loop parallelises without sharing generator state.
#include <cmath>
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
    const int64_t n = x.numel();
    const T scale = p < 1 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
    // Element i is kept when its 32-bit uniform u satisfies u >= p * 2^32
    // (p = 1 drops everything); one 64-bit hash serves two elements.
    const uint64_t threshold = static_cast<uint64_t>(std::ldexp(p, 32));
    parallel_for(0, (n + 1) / 2, kElementwiseGrain / 2, [=](int64_t b, int64_t e) {
      for (int64_t q = b; q < e; ++q) {
        const uint64_t h = splitmix64(seed, static_cast<uint64_t>(q));
        const int64_t i = 2 * q;
        const T keep0 = (h & 0xFFFFFFFFu) >= threshold ? scale : T(0);
        m[i] = keep0;
        o[i] = xp[i] * keep0;
        if (i + 1 < n) {
          const T keep1 = (h >> 32) >= threshold ? scale : T(0);
          m[i + 1] = keep1;
          o[i + 1] = xp[i + 1] * keep1;
        }
      }
    });
  });
}

static const native::RegisterKernel reg_dropout(native::dropout_stub, kCPU, &dropout_kernel);

}  // namespace cpu
}  // namespace loom
