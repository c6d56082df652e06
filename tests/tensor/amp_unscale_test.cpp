// native::amp_unscale_ (PyTorch's _amp_foreach_non_finite_check_and_unscale_)
// on the CPU: each gradient multiplied by inv_scale in float32 (float64 for
// float64) and rounded once, in place; found_inf set to 1 by any inf or NaN
// (read before the multiply) and never reset; inv_scale == 1 leaves the
// values alone; non-contiguous gradients; the errors.
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/native/AmpUnscale.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

Tensor flag() { return zeros({1}, kFloat32); }
Tensor scalar32(double v) { return full({1}, v, TensorOptions(kFloat32)); }

TEST(AmpUnscale, MultipliesEachDTypeInItsOpMath) {
  const std::vector<double> v = {3.0, -1.5, 1e-3, 65504.0, 0.0};
  const double inv = 1.0 / 3.0;  // not exact in float32
  for (DType d : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    Tensor g = tensor<double>(v).to(d);
    const Tensor before = g.clone();
    const uint64_t version = g.version();
    Tensor found = flag();
    native::amp_unscale_({g}, found, scalar32(inv));
    // The expected values: float32 (float64) arithmetic of the stored value
    // and float32(1/3), rounded into d.
    const Tensor want = d == kFloat64
                            ? before * static_cast<double>(static_cast<float>(inv))
                            : (before.to(kFloat32) * static_cast<float>(inv)).to(d);
    EXPECT_EQ(g.dtype(), d);
    EXPECT_TRUE(AllClose(g, want, 0, 0)) << dtype_name(d);
    EXPECT_EQ(found.item<float>(), 0.0f) << dtype_name(d);
    EXPECT_GT(g.version(), version);
  }
}

TEST(AmpUnscale, InfAndNanSetTheFlagWhichStaysSet) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {inf, -inf, std::nanf("")}) {
    Tensor a = tensor<float>({1, 2, 3}), b = tensor<float>({4, bad, 6});
    Tensor found = flag();
    native::amp_unscale_({a, b}, found, scalar32(0.5));
    EXPECT_EQ(found.item<float>(), 1.0f);
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0.5f, 1, 1.5f}));  // still unscaled
    native::amp_unscale_({a}, found, scalar32(2.0));
    EXPECT_EQ(found.item<float>(), 1.0f) << "a clean call must not reset the flag";
  }
  // Read before the multiply: a finite value that overflows when unscaled
  // does not set the flag (PyTorch's order).
  Tensor big = tensor<float>({3e38f});
  Tensor found = flag();
  native::amp_unscale_({big}, found, scalar32(4.0));
  EXPECT_EQ(found.item<float>(), 0.0f);
  EXPECT_TRUE(std::isinf(big.to_vector<float>()[0]));
}

TEST(AmpUnscale, AScaleOfOneLeavesValuesAsTheyAre) {
  Tensor g = tensor<float>({1.0f, -0.0f, std::nanf("")});
  Tensor found = flag();
  native::amp_unscale_({g}, found, scalar32(1.0));
  const std::vector<float> got = g.to_vector<float>();
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_TRUE(std::signbit(got[1]));
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(found.item<float>(), 1.0f);
}

TEST(AmpUnscale, MixedDTypesAndNonContiguousGradients) {
  Tensor a = arange(0, 12, 1, kFloat32).view({3, 4});
  Tensor at = a.t();  // a non-contiguous view: unscaled through a copy, then written back
  Tensor b = arange(0, 5, 1, kFloat64);
  Tensor c = arange(0, 6, 1, kFloat32).to(kBFloat16);
  // Channels last (a convolution's weight gradient): dense, so as it is.
  Tensor cl = arange(0, 24, 1, kFloat32).view({1, 2, 3, 4}).contiguous(MemoryFormat::kChannelsLast);
  Tensor found = flag();
  native::amp_unscale_({at, b, c, Tensor(zeros({0})), cl}, found, scalar32(0.25));
  EXPECT_TRUE(AllClose(cl, arange(0, 24, 1, kFloat32).view({1, 2, 3, 4}) * 0.25, 0, 0));
  EXPECT_TRUE(cl.is_contiguous(MemoryFormat::kChannelsLast));
  EXPECT_TRUE(AllClose(a, arange(0, 12, 1, kFloat32).view({3, 4}) * 0.25, 0, 0));
  EXPECT_TRUE(AllClose(b, arange(0, 5, 1, kFloat64) * 0.25, 0, 0));
  EXPECT_TRUE(AllClose(c, (arange(0, 6, 1, kFloat32) * 0.25).to(kBFloat16), 0, 0));
  EXPECT_EQ(found.item<float>(), 0.0f);
}

TEST(AmpUnscale, Errors) {
  Tensor g = ones({2});
  EXPECT_LOOM_ERROR(native::amp_unscale_({g}, zeros({1}, kFloat64), scalar32(1)), "amp_unscale_",
                    "found_inf", "float32");
  EXPECT_LOOM_ERROR(native::amp_unscale_({g}, flag(), zeros({2})), "inv_scale", "one element");
  EXPECT_LOOM_ERROR(native::amp_unscale_({g, arange(0, 3)}, flag(), scalar32(1)), "gradient 1",
                    "floating-point");
  EXPECT_LOOM_ERROR(native::amp_unscale_({g, Tensor()}, flag(), scalar32(1)), "gradient 1",
                    "undefined");
  native::amp_unscale_({}, flag(), scalar32(1));  // nothing to do
}

}  // namespace
}  // namespace loom
