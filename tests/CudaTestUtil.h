// Helpers shared by the CUDA parity tests: a fixture that skips where no GPU
// is visible, random inputs of every dtype, and a CPU-vs-CUDA comparison.
//
// Parity tolerance: float32 within 1e-5 relative plus `atol32` absolute (for
// results near 0), float64 within 1e-12 relative plus 1e-14 absolute,
// integers and bool exactly; nan matches nan, infinities match themselves.
#pragma once

#include <cmath>
#include <vector>

#include "tensor/CudaRuntime.h"
#include "tests/TestUtil.h"

namespace loom {
namespace testing_cuda {

inline const Device kGpu(kCUDA, 0);

// Base fixture of every gpu-tagged test: skips each case without a GPU.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible";
  }
};

// Random values of `dtype`: floats uniform in [lo, hi), signed integers in
// [-5, 5], uint8 in [0, 10], bools about half true.  Small integers keep
// products and powers inside every integer type, so no result depends on
// overflow.
inline Tensor sample(DType dtype, IntList sizes, uint64_t seed, double lo = -2.0,
                     double hi = 2.0) {
  Generator gen(seed + 17);
  switch (dtype) {
    case kFloat32:
    case kFloat64: return rand(sizes, dtype, &gen) * (hi - lo) + lo;
    case kFloat16:
    case kBFloat16: return (rand(sizes, kFloat32, &gen) * (hi - lo) + lo).to(dtype);
    case kUInt8: return randint(0, 11, sizes, kUInt8, &gen);
    case kBool: return rand(sizes, kFloat32, &gen).gt(0.5);
    default: return randint(-5, 6, sizes, dtype, &gen);
  }
}

// Whether `actual` (a CUDA result) matches `expected` (the CPU's): same
// shape and dtype, on a CUDA device, values within the dtype's tolerance.
inline ::testing::AssertionResult Parity(const Tensor& actual, const Tensor& expected,
                                         double atol32 = 1e-7) {
  if (!actual.is_cuda())
    return ::testing::AssertionFailure() << "result not on CUDA: " << actual.describe();
  if (actual.sizes() != expected.sizes() || actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure()
           << actual.describe() << " vs expected " << expected.describe();
  double rtol = 0, atol = 0;
  if (expected.dtype() == kFloat32) rtol = 1e-5, atol = atol32;
  if (expected.dtype() == kFloat64) rtol = 1e-12, atol = 1e-14;
  const std::vector<double> a = actual.cpu().to_vector<double>();
  const std::vector<double> b = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i]) continue;  // infinities too
    if (!(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i])))
      return ::testing::AssertionFailure() << "element " << i << " of " << expected.describe()
                                           << ": " << a[i] << " vs expected " << b[i];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace testing_cuda
}  // namespace loom
