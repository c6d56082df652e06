// Division by a divisor fixed at launch, without a divide instruction: the
// elementwise kernels of tensor/cuda turn a flat index into (row, channel,
// position) once per element, and a 64-bit `/` or `%` there costs tens of
// instructions on a GPU.  Plain C++ (LOOM_HOST_DEVICE), so the same code runs
// in the kernels and in the CPU tests that check it.
//
// For a divisor d (1 <= d < 2^31) the host picks s = ceil(log2 d) and the
// multiplier m = floor(2^32 (2^s - d) / d) + 1 (round-up multiply-shift,
// Granlund and Montgomery 1994); then for every 0 <= n < 2^31
//   n / d == (mulhi32(n, m) + n) >> s
// with the sum taken in 32 bits (it stays below 2^32 for such n).  Callers
// use it only when every index of the launch is below 2^31
// (fits_int_divider) and fall back to 64-bit division otherwise.
#pragma once

#include <cstdint>

#include "tensor/HostDevice.h"

namespace loom {
namespace cuda {

// Whether every index below `n` may go through an IntDivider.
inline bool fits_int_divider(int64_t n) { return n >= 0 && n <= (int64_t(1) << 31); }

class IntDivider {
 public:
  IntDivider() = default;
  // d in [1, 2^31); the caller has checked it.
  explicit IntDivider(uint32_t d) : divisor_(d) {
    while ((uint64_t(1) << shift_) < d) ++shift_;
    const uint64_t two32 = uint64_t(1) << 32;
    multiplier_ = static_cast<uint32_t>(two32 * ((uint64_t(1) << shift_) - d) / d + 1);
  }

  LOOM_HOST_DEVICE uint32_t divisor() const { return divisor_; }

  // n / divisor for 0 <= n < 2^31.
  LOOM_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, multiplier_);
#else
    const uint32_t hi = static_cast<uint32_t>((uint64_t(n) * multiplier_) >> 32);
#endif
    return (hi + n) >> shift_;
  }

  // n % divisor for 0 <= n < 2^31.
  LOOM_HOST_DEVICE uint32_t mod(uint32_t n) const { return n - div(n) * divisor_; }

 private:
  uint32_t divisor_ = 1;
  uint32_t multiplier_ = 1;
  uint32_t shift_ = 0;
};

}  // namespace cuda
}  // namespace loom
