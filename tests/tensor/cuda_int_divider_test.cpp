// tensor/cuda/IntDivider.h on the CPU (the same code the kernels run): the
// multiply-shift quotient and remainder equal `/` and `%` for every divisor
// 1..4096 against every numerator below 2^16 and the numerators near 2^31,
// for powers of two and their neighbours up to 2^31 - 1, and for random
// pairs below 2^31.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tensor/cuda/IntDivider.h"

namespace loom {
namespace cuda {
namespace {

constexpr uint32_t kTop = (uint32_t(1) << 31) - 1;  // the largest numerator allowed

// The numerators checked for each divisor: small ones, both sides of every
// multiple of d near the top of the range, and the top itself.
std::vector<uint32_t> numerators(uint32_t d) {
  std::vector<uint32_t> n;
  for (uint32_t i = 0; i < 1024; ++i) n.push_back(i);
  for (uint32_t i = 0; i < 64; ++i) n.push_back(kTop - i);
  const uint32_t q = kTop / d;
  for (uint32_t k = q >= 8 ? q - 8 : 0; k <= q; ++k) {
    const uint64_t m = uint64_t(k) * d;
    for (int64_t off : {-1, 0, 1})
      if (int64_t(m) + off >= 0 && int64_t(m) + off <= kTop)
        n.push_back(static_cast<uint32_t>(int64_t(m) + off));
  }
  return n;
}

::testing::AssertionResult divides(uint32_t d, uint32_t n) {
  const IntDivider div(d);
  if (div.div(n) == n / d && div.mod(n) == n % d) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << n << " / " << d << ": got " << div.div(n) << " rem "
                                       << div.mod(n) << ", expected " << n / d << " rem " << n % d;
}

TEST(IntDivider, SmallDivisorsEveryNumeratorBelow65536) {
  for (uint32_t d = 1; d <= 300; ++d) {
    const IntDivider div(d);
    for (uint32_t n = 0; n < 65536; ++n)
      if (div.div(n) != n / d || div.mod(n) != n % d) {
        ADD_FAILURE() << divides(d, n).message();
        return;
      }
  }
}

TEST(IntDivider, DivisorsUpTo4096NearTheTopOfTheRange) {
  for (uint32_t d = 1; d <= 4096; ++d)
    for (uint32_t n : numerators(d)) ASSERT_TRUE(divides(d, n));
}

TEST(IntDivider, PowersOfTwoAndNeighbours) {
  for (int k = 0; k < 31; ++k) {
    const uint32_t p = uint32_t(1) << k;
    for (int64_t off : {-1, 0, 1}) {
      const int64_t d = int64_t(p) + off;
      if (d < 1 || d > kTop) continue;
      for (uint32_t n : numerators(static_cast<uint32_t>(d)))
        ASSERT_TRUE(divides(static_cast<uint32_t>(d), n));
    }
  }
}

TEST(IntDivider, RandomPairsBelow2To31) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> any(1, kTop);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t d = any(gen) >> (i % 31);  // divisors of every magnitude
    ASSERT_TRUE(divides(d == 0 ? 1 : d, any(gen)));
  }
}

TEST(IntDivider, FitsOnlyIndicesBelow2To31) {
  EXPECT_TRUE(fits_int_divider(0));
  EXPECT_TRUE(fits_int_divider(int64_t(1) << 31));  // indices 0 .. 2^31 - 1
  EXPECT_FALSE(fits_int_divider((int64_t(1) << 31) + 1));
  EXPECT_FALSE(fits_int_divider(-1));
}

}  // namespace
}  // namespace cuda
}  // namespace loom
